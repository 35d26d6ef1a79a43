-- name: macros/windows
-- purpose: the cube's window arithmetic on integer µs since the epoch. Windows are left-open,
--   right-closed, (start, start + width], like a PromQL range ending at the window's end: the window
--   of a sample at t is time_bucket(width, t - 1 µs) with DuckDB's origin for sub-month widths,
--   2000-01-03 00:00 UTC = 946857600000000 µs. Integer arithmetic (no timestamp functions) because
--   it runs per sample; `//` and `%` truncate towards zero, so a time before the origin (a negative
--   remainder) moves one window down.

-- the window length in µs, from the `window_s` seconds every cube query takes
create or replace macro window_us(window_s) as window_s::bigint * 1000000;

-- the start (µs) of the window holding t_us
create or replace macro window_lo_us(t_us, window_s) as
    t_us - 1 - ((t_us - 1 - 946857600000000) % window_us(window_s))
    - case when (t_us - 1 - 946857600000000) % window_us(window_s) < 0 then window_us(window_s) else 0 end;

-- the number of the window holding t_us, counted from the origin (window 0 starts there)
create or replace macro window_index(t_us, window_s) as
    (t_us - 1 - 946857600000000) // window_us(window_s)
    - ((t_us - 1 - 946857600000000) % window_us(window_s) < 0)::bigint;

-- the start (µs) of window number w
create or replace macro window_start_us(w, window_s) as 946857600000000 + w * window_us(window_s);
