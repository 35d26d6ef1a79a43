-- name: settings__expire_sessions
-- purpose: delete every settings row of the sessions last seen before $cutoff (their `_seen` stamp),
--   except the session $keep (the one asking, whatever its stamp says)
-- grain: DML; deletes the rows of each stale session
-- reads: settings
-- @param cutoff TIMESTAMP  sessions seen before this are stale (UTC)
-- @param keep VARCHAR  a session id never expired here
delete from settings
where starts_with(key, 'session/')
    and split_part(key, '/', 2) != $keep
    and split_part(key, '/', 2) in (
        select split_part(key, '/', 2)
        from settings
        where starts_with(key, 'session/') and ends_with(key, '/_seen')
            and try_cast(value ->> '$' as timestamp) < $cutoff
    )
