-- name: ingest__insert_series
-- purpose: add the staged file's series that the workspace does not hold yet (series are global)
-- grain: DML; one row inserted per new series
-- reads: stage_series
insert or ignore into series
select series_id, any_value(metric), any_value(family), any_value(suffix), any_value(mtype),
    any_value(labels), any_value(le), any_value(group_id), any_value(replica)
from stage_series
group by series_id
