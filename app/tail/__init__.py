"""Where the tail lives: breach attribution from the histograms and the twin, and the early signals."""
