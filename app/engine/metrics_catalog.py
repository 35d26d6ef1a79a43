"""vLLM V1 metric names and default buckets (``reference/serving-metrics.md`` §2.2–2.4, vLLM 0.33.0).

Names are as exposed by prometheus_client: counters end in ``_total`` with a ``_created`` sibling,
histograms expose ``_bucket{le}``/``_count``/``_sum``/``_created``. ``le`` values are printed the way
prometheus_client prints them (``"0.001"``, ``"1.0"``, ``"20000.0"``, ``"+Inf"``).
"""

from __future__ import annotations

TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
                20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)
ITL_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
               40.0, 80.0)
REQUEST_LATENCY_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0,
                           120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0)
ITERATION_TOKEN_BUCKETS = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
PREEMPTION_BUCKETS = (1, 2, 3, 4, 5, 10, 20)
FINISHED_REASONS = ("stop", "length", "abort", "error")  # request_success_total children, pre-created


def request_token_buckets(max_model_len: int) -> tuple[int, ...]:
    """vLLM's ``build_1_2_5_buckets(max_model_len)``: 1, 2, 5, 10, 20, 50, ... up to max_model_len."""
    out, exponent = [], 0
    while True:
        for mantissa in (1, 2, 5):
            value = mantissa * 10**exponent
            if value > max_model_len:
                return tuple(out)
            out.append(value)
        exponent += 1


def go_float(value: float) -> str:
    """A bucket bound as prometheus_client's ``floatToGoString`` prints it."""
    d = float(value)
    if d == float("inf"):
        return "+Inf"
    s = repr(d)
    dot = s.find(".")
    if d > 0 and dot > 6:  # Go switches to exponent notation sooner than Python
        mantissa = f"{s[0]}.{s[1:dot]}".rstrip("0.")
        return f"{mantissa}e+0{dot - 1}"
    return s


# request-level histograms observed at finish: name -> (bucket family, record column)
FINISH_HISTOGRAMS = (
    ("vllm:e2e_request_latency_seconds", "latency", "e2e_s"),
    ("vllm:request_queue_time_seconds", "latency", "queue_s"),
    ("vllm:request_prefill_time_seconds", "latency", "prefill_s"),
    ("vllm:request_decode_time_seconds", "latency", "decode_s"),
    ("vllm:request_inference_time_seconds", "latency", "inference_s"),
    ("vllm:request_time_per_output_token_seconds", "itl", "tpot_s"),
    ("vllm:request_prompt_tokens", "tokens", "prompt_tokens"),
    ("vllm:request_generation_tokens", "tokens", "output_tokens"),
    ("vllm:request_num_preemptions", "preemptions", "preemptions"),
)
# the prefix cache's counters (vLLM 0.32, as a real engine exports them): tokens queried and hit per
# request scheduled for the first time (engine-level), and per request at its first token its prompt's
# cached tokens and its prompt tokens by where they came from
PREFIX_CACHE_QUERIES = "vllm:prefix_cache_queries"
PREFIX_CACHE_HITS = "vllm:prefix_cache_hits"
PROMPT_TOKENS_CACHED = "vllm:prompt_tokens_cached"
PROMPT_TOKENS_BY_SOURCE = "vllm:prompt_tokens_by_source"
PROMPT_TOKEN_SOURCES = ("local_compute", "local_cache_hit", "external_kv_transfer")
TTFT = "vllm:time_to_first_token_seconds"
ITL = "vllm:inter_token_latency_seconds"
ITERATION_TOKENS = "vllm:iteration_tokens_total"


# what a minimal export lacks (a `query_range` export or scrape loop of vLLM V1 that kept only the
# request histograms, gauges and counters): the engine config, the tokens-per-step histogram and the
# per-phase time histograms
OPTIONAL_FAMILIES = ("vllm:cache_config_info", ITERATION_TOKENS, "vllm:request_prefill_time_seconds",
                     "vllm:request_decode_time_seconds", "vllm:request_inference_time_seconds")
