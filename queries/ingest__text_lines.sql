-- name: ingest__text_lines
-- purpose: the lines of a text file, numbered from 1 in file order, read in parallel by the CSV
--   reader with one VARCHAR column (delimiter chr(1), no quoting). Blank lines are kept (as NULL)
--   so numbers match an editor's; with new_line '\r\n' both LF and CRLF endings count once
--   (the reader checks beforehand that the file holds no lone CR and no chr(1)).
--   row_number() over () keeps the scan order.
-- grain: one row per line of the file
-- @param path VARCHAR  the (uncompressed) file to read
-- @returns line_no BIGINT, line VARCHAR
with
raw_lines as (
    select line
    from read_csv(
        $path,
        columns = {'line': 'VARCHAR'},
        delim = chr(1),
        quote = '',
        escape = '',
        header = false,
        auto_detect = false,
        strict_mode = false,
        new_line = '\r\n',
        max_line_size = 16777216
    )
),

final as (
    select row_number() over () as line_no, line
    from raw_lines
)

select * from final
