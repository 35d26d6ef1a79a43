-- name: macros/labels
-- purpose: a series as a person reads it in a message, `name{a="x",le="0.5"}`: labels sorted by
--   name, values quoted as the exposition quotes them (backslash, quote and newline escaped)

create or replace macro series_text(metric, labels) as
    metric || '{' || array_to_string(list_transform(list_sort(map_keys(labels)), lambda k: k || '="'
        || replace(replace(replace(labels[k], '\', '\\'), '"', '\"'), chr(10), '\n') || '"'), ',') || '}';
