-- name: records__from_guidellm
-- purpose: per-request records of a GuideLLM benchmark report (`guidellm benchmark ... --output-path
--   benchmarks.json`; a YAML report is converted to JSON first): `benchmarks[].requests` holds the
--   `successful`, `errored` and `incomplete` requests of each benchmark. Every version serialises
--   per request `time_to_first_token_ms`, `inter_token_latency_ms` ((last token - first token) /
--   (output tokens - 1): vLLM's TPOT; GuideLLM's own `time_per_output_token_ms` divides by all output
--   tokens and includes the TTFT in newer versions, so it is not used), `request_latency` (s),
--   `prompt_tokens`, `output_tokens`, and the start as Unix seconds (`start_time` up to 0.3,
--   `request_start_time` from 0.4). Errored requests failed (their times NULL); incomplete ones were
--   still running when the benchmark ended (in flight: no finish, no failure). A report of several
--   benchmarks (a sweep of rates) gives one path per benchmark.
-- grain: one row per request
-- reads: $path
-- @param path VARCHAR  the JSON file (the slim copy `app.records` makes: prompts and outputs as null)
-- @param max_object_size BIGINT  the file's size (the whole file is one JSON object)
-- @param path_name VARCHAR  path to file the requests under ('' = 'guidellm')
-- @returns path VARCHAR, replica VARCHAR, arrival TIMESTAMP, first_token TIMESTAMP, finish TIMESTAMP,
--   ttft_s DOUBLE, tpot_s DOUBLE, e2e_s DOUBLE, queue_s DOUBLE, prompt_tokens BIGINT,
--   output_tokens BIGINT, finished_reason VARCHAR
with
doc as (
    select *
    from read_json(
        $path, format = 'auto', maximum_object_size = $max_object_size,
        columns = {benchmarks: 'STRUCT(requests STRUCT(
            successful STRUCT(time_to_first_token_ms DOUBLE, inter_token_latency_ms DOUBLE, request_latency DOUBLE,
                prompt_tokens BIGINT, output_tokens BIGINT, start_time DOUBLE, request_start_time DOUBLE)[],
            errored STRUCT(prompt_tokens BIGINT, output_tokens BIGINT, start_time DOUBLE, request_start_time DOUBLE)[],
            incomplete STRUCT(time_to_first_token_ms DOUBLE, prompt_tokens BIGINT, output_tokens BIGINT,
                start_time DOUBLE, request_start_time DOUBLE)[]
        ))[]'}
    )
),

benchmarks as (
    select
        unnest(generate_series(1, len(benchmarks))) as bench_no,
        len(benchmarks) as n_benchmarks,
        unnest(benchmarks) as b
    from doc
),

named as (
    select
        coalesce(nullif($path_name, ''), 'guidellm')
        || case when n_benchmarks > 1 then ' #' || bench_no else '' end as path_name,
        b.requests as r
    from benchmarks
),

successful as (
    select path_name, unnest(r.successful) as q from named
),

errored as (
    select path_name, unnest(r.errored) as q from named
),

incomplete as (
    select path_name, unnest(r.incomplete) as q from named
),

requests as (
    select
        path_name,
        coalesce(q.request_start_time, q.start_time) as start_s,
        q.time_to_first_token_ms / 1000 as ttft_s,
        q.inter_token_latency_ms / 1000 as tpot_s,
        q.request_latency as e2e_s,
        q.prompt_tokens,
        q.output_tokens,
        'stop' as finished_reason
    from successful
    union all
    select
        path_name, coalesce(q.request_start_time, q.start_time), null, null, null, q.prompt_tokens,
        q.output_tokens, 'error'
    from errored
    union all
    select
        path_name, coalesce(q.request_start_time, q.start_time), q.time_to_first_token_ms / 1000, null, null,
        q.prompt_tokens, q.output_tokens, null
    from incomplete
),

final as (
    select
        path_name as path,
        cast(null as varchar) as replica,
        make_timestamp(cast(start_s * 1e6 as bigint)) as arrival,
        make_timestamp(cast((start_s + ttft_s) * 1e6 as bigint)) as first_token,
        make_timestamp(cast((start_s + e2e_s) * 1e6 as bigint)) as finish,
        ttft_s,
        case when finished_reason = 'stop' then coalesce(tpot_s, 0) end as tpot_s,
        e2e_s,
        cast(null as double) as queue_s,
        prompt_tokens,
        output_tokens,
        finished_reason
    from requests
)

select * from final
