-- name: ingest__insert_families
-- purpose: keep the HELP/TYPE declarations of the staged file
-- grain: DML; one row per declared family
-- reads: stage_families
-- @param dataset_id INTEGER  the new dataset
insert into families
select $dataset_id, family, any_value(mtype), any_value(help)
from stage_families
group by family
