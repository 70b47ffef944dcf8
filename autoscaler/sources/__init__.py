"""Where the data comes from: pod discovery and metric sources.

- `base`: the `PodDiscovery` and `MetricSource` interfaces.
- `targets`: pods from a static targets file; `kube_pods`, `kube_watch`, `kube_deployments` (with
  `kube_deployment_reads`), `kube_objects`: pods and runtimes from the Kubernetes API (list + watch, through
  `autoscaler.kube`).
- `scrape`: the exporters scraped directly; `scrape_problems` keeps what fails for each pod (for /debug, and the
  log when it starts); `exposition` reads their text format into `PodSample`s.
- `prometheus`: the same signals queried from Prometheus (or DCGM's series); `prometheus_promql` writes the
  queries (`prometheus_matchers`: the matchers every selector carries), `prometheus_reader` runs them
  (`prometheus_request`: one request, its failures by reason), `prometheus_answers` says what answered instead,
  `prometheus_round_pods` which pods a round's answers have (none: an outage) and when it shows what the
  lookback-delta or scrape interval would cause, `prometheus_pods` reads each pod's sample from the answers
  (holding the last good one), `prometheus_news` counts and says Prometheus's failures and recoveries.

May import `kube`, `policies` (for types), `model`, `names`; never `api` or `actuation`.
"""
