-- name: live__stage_families
-- purpose: the type of each known metric family (data/signals.csv), as a file's `# TYPE` lines give
--   them, so that `ingest__staged_series` classifies a pulled series as the exposition would
-- grain: one row per known family
-- reads: live_families
-- @returns family VARCHAR, mtype VARCHAR, help VARCHAR
select family, any_value(mtype) as mtype, null::varchar as help
from live_families
group by family
