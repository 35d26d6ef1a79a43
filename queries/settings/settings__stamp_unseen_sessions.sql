-- name: settings__stamp_unseen_sessions
-- purpose: give every session that has settings but no `session/<id>/_seen` stamp (rows written before
--   sessions expired) the stamp $now, so it expires as long after now as a session seen now does
-- grain: DML; inserts one row per session without a stamp
-- reads: settings
-- @param now TIMESTAMP  the stamp to give (UTC)
insert into settings
select distinct
    'session/' || split_part(key, '/', 2) || '/_seen' as key,
    to_json(strftime($now, '%Y-%m-%dT%H:%M:%S')) as value
from settings
where starts_with(key, 'session/')
    and split_part(key, '/', 2) not in (
        select split_part(key, '/', 2) from settings where starts_with(key, 'session/') and ends_with(key, '/_seen')
    )
