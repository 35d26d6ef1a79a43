-- name: records__from_sglang_bench
-- purpose: per-request records of SGLang's `python -m sglang.bench_serving --output-file X.jsonl
--   --output-details`: one JSON object per run, appended line by line, holding the run's summary and,
--   with --output-details, one array per field with a value per request (`ttfts`, `itls` (the gaps
--   between streamed chunks, a list per request), `input_lens`, `output_lens`, `errors`,
--   `generated_texts`). Newer versions nest those arrays under `details`. E2E = TTFT plus the sum of
--   the gaps; TPOT as SGLang and vLLM define it, (E2E - TTFT) / (output tokens - 1), 0 when output
--   tokens <= 1. A request with a non-empty error failed (its times NULL). The file holds no wall
--   clock: every time is NULL (shares, no placement in time). A file of several runs gives one path
--   per run (the run's `tag` when it has one, else its line number).
-- grain: one row per request
-- reads: $path
-- @param path VARCHAR  the JSONL file
-- @param max_object_size BIGINT  the file's size (a line may be as large as the file)
-- @param path_name VARCHAR  path to file the requests under ('' = 'sglang')
-- @returns path VARCHAR, replica VARCHAR, arrival TIMESTAMP, first_token TIMESTAMP, finish TIMESTAMP,
--   ttft_s DOUBLE, tpot_s DOUBLE, e2e_s DOUBLE, queue_s DOUBLE, prompt_tokens BIGINT,
--   output_tokens BIGINT, finished_reason VARCHAR
with
runs as (
    select
        row_number() over () as run_no,
        count(*) over () as n_runs,
        *
    from read_json(
        $path, format = 'newline_delimited', maximum_object_size = $max_object_size,
        columns = {
            tag: 'VARCHAR', ttfts: 'DOUBLE[]', itls: 'DOUBLE[][]', input_lens: 'BIGINT[]',
            output_lens: 'BIGINT[]', errors: 'VARCHAR[]',
            details: 'STRUCT(ttfts DOUBLE[], itls DOUBLE[][], input_lens BIGINT[], output_lens BIGINT[], errors VARCHAR[])'
        }
    )
),

arrays as (
    select
        coalesce(nullif($path_name, ''), 'sglang')
        || case when n_runs > 1 then ' ' || coalesce(tag, 'run ' || run_no) else '' end as path_name,
        coalesce(ttfts, details.ttfts) as ttfts,
        coalesce(itls, details.itls) as itls,
        coalesce(input_lens, details.input_lens) as input_lens,
        coalesce(output_lens, details.output_lens) as output_lens,
        coalesce(errors, details.errors) as errors
    from runs
),

requests as (
    select
        path_name,
        unnest(generate_series(1, len(ttfts))) as i,
        unnest(ttfts) as ttft,
        unnest(itls) as gaps,
        unnest(input_lens) as input_len,
        unnest(output_lens) as output_len,
        unnest(errors) as error
    from arrays
),

timed as (
    select
        path_name,
        coalesce(error, '') != '' as failed,
        ttft,
        ttft + coalesce(list_sum(gaps), 0) as e2e,
        input_len,
        output_len
    from requests
    where i is not null
),

final as (
    select
        path_name as path,
        cast(null as varchar) as replica,
        cast(null as timestamp) as arrival,
        cast(null as timestamp) as first_token,
        cast(null as timestamp) as finish,
        case when not failed then ttft end as ttft_s,
        case when failed then null when output_len > 1 then (e2e - ttft) / (output_len - 1) else 0 end as tpot_s,
        case when not failed then e2e end as e2e_s,
        cast(null as double) as queue_s,
        input_len as prompt_tokens,
        output_len as output_tokens,
        case when failed then 'error' else 'stop' end as finished_reason
    from timed
)

select * from final
