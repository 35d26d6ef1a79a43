"""Session-state keys in one place (widgets and pages refer to these names only)."""

from __future__ import annotations

UPLOADS = "data_uploads"
LAST_REPORTS = "data_last_reports"
WINDOW = "cube_window"
PATH_LABELS = "cube_path_labels"
