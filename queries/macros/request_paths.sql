-- name: macros/request_paths
-- purpose: the request paths of a cube, one definition for every query and page: the paths with a
--   request-level latency histogram (TTFT, TPOT, ITL, E2E or queue; a `_count` without buckets
--   counts, as its empty layout in cube_bucket_layouts). Engine-wide gauge paths have none.
-- reads: cube_bucket_layouts

create or replace macro request_paths(cid) as table
    select distinct path from cube_bucket_layouts where cube_id = cid;
