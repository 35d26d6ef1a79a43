-- name: macros/breach
-- purpose: how many observations lie above a threshold T, from one window's cumulative bucket
--   counts (docs/methods.md#share-above-threshold); divided by n, the breach share. Inputs: n = count in the +Inf bucket;
--   c_at = cumulative count at a bound equal to T (NULL if T is not a bound); le_lo/c_lo = largest
--   finite bound below T and its cumulative count (NULL when T lies in the first bucket: the lower
--   edge is 0 with count 0); le_hi/c_hi = smallest finite bound above T (NULL when T is beyond the
--   last finite bound). Breach is x > T, matching the inclusive `le`. Counts, not shares, so that
--   windows add up: the share over a range is the sum of its windows' counts over the sum of n.

-- exact when T is a bound; else Prometheus' linear interpolation (histogram_fraction(T, +Inf));
-- beyond the last finite bound every +Inf observation counts as above T (the upper bound)
create or replace macro breached_estimate(n, t, c_at, le_lo, c_lo, le_hi, c_hi) as
    case
        when n is null or n <= 0 then null
        when c_at is not null then n - c_at
        when le_hi is null then n - coalesce(c_lo, 0)
        else n - (
            coalesce(c_lo, 0)
            + (c_hi - coalesce(c_lo, 0)) * (t - coalesce(le_lo, 0)) / (le_hi - coalesce(le_lo, 0))
        )
    end;

-- hard lower bound, whatever the distribution inside the bucket holding T
create or replace macro breached_low(n, c_at, c_hi) as
    case
        when n is null or n <= 0 then null
        when c_at is not null then n - c_at
        when c_hi is null then 0.0
        else n - c_hi
    end;

-- hard upper bound
create or replace macro breached_high(n, c_at, c_lo) as
    case
        when n is null or n <= 0 then null
        when c_at is not null then n - c_at
        else n - coalesce(c_lo, 0)
    end;
