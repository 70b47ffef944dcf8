"""Pure decisions: every function here is a function of a snapshot, a policy and a clock, and does no I/O.

- `aggregation`: per-signal freshness, the skew-aware power mean, cache pressure; `runtime_aggregate`: the
  `Aggregate` it makes; `pod_codes`: the per-pod tuples read off its pass's state codes.
- `copies_in_use`: the model copies the pods served lately, which the cache need counts.
- `recommendation`: desired replicas from the aggregates (capacity, queue and cache terms, bounds).
- `smoothing`: up at once, down exponentially, held while data is missing.
- `ranking`: each pod's need and its deletion-cost bucket.
- `decision`: composes the above into the `RuntimeView` the API serves; `signal_profile`: what it reads off a
  runtime's signal stats (coverage, the signals present), worked out once per stats mapping; `runtime_memory`:
  what it carries to the next refresh, and how that forgets a signal the pods stopped having; `served_values`:
  each served value smoothed and held; `view_warnings`: the view's warnings; `policy_terms`: a policy's ranking
  terms and bounds, made once per policy.
- `warmup`: a runtime with no memory (the adapter just started) is served only once seen whole, or after a
  grace period never below what runs.
- `policy`, `config`: the per-runtime settings, from the config file and Deployment annotations.

May import only `autoscaler.model`, `autoscaler.names` and the standard library (and each other): never
`kube`, `sources`, `api` or `actuation`. `tests/test_architecture.py` enforces it.
"""
