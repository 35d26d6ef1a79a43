-- name: cube__request_paths
-- purpose: the paths a promise applies to (macro `request_paths`), for the pages' path lists
-- grain: one row per path
-- reads: cube_bucket_layouts
-- @param cube_id INTEGER  a cube of cube_index
-- @returns path VARCHAR
select path from request_paths($cube_id) order by path
