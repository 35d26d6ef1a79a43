-- name: ingest__text_lines
-- purpose: the lines of a text file in file order, read in parallel by the CSV reader with one
--   VARCHAR column (delimiter chr(1), no quoting). Blank lines are kept (as NULL) so numbers
--   match an editor's; with new_line '\r\n' both LF and CRLF endings count once (the reader checks
--   beforehand that the file holds no lone CR and no chr(1)). Materialized, a line's number is its
--   rowid's rank (a scan of one table keeps its order, DuckDB's order preservation; app/ingest/text.py
--   makes the view `text_lines` of (line_no, line)): numbering here with row_number() over () would
--   make the copy run on one thread (twice as long).
-- grain: one row per line of the file
-- reads: $path
-- @param path VARCHAR  the (uncompressed) file to read
-- @returns line VARCHAR
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
    select line
    from raw_lines
)

select * from final
