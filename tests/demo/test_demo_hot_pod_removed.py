"""Whether the demo's hot pod can legitimately cost less than its copies, and what the user then reads.

The e2e test of the whole run asserted that the first pod removed is one a scale-up added, never demo-0: the hot
pod ties with its copies (each serves the hot model's share, none holds a model only it served), and of equal
costs the newest goes first. But the adapter ranks by the exporters' rates, each a 6 s window read at its own
moment: as the traffic drops they fall, and a window read a moment later reads lower. A run read "removed demo-0
(cost 300, was 400; lowest, next demo-4 at 400; its models have copies)". Here, the adapter's own ranking of such
a moment: the hot pod's rate trails its copies' to under 0.8 of theirs, a bucket lower.
"""

from __future__ import annotations

from autoscaler.demo.fake_modelmesh_metrics import FakeModelMesh, ModelMeshLoad
from autoscaler.demo.fleet import DemoPod
from autoscaler.demo.removals import scale_down
from autoscaler.model import PodSample
from autoscaler.policies.policy import RuntimePolicy
from autoscaler.policies.ranking import default_terms, rank_pods

NOW = 1000.0
HOT_MODELS = {f"demo-0-model-{index}": NOW for index in range(6)}


def sample(name: str, rps: float, models: dict[str, float]) -> PodSample:
    """A Ready pod with fresh data, its cache half full as every fake pod's."""
    return PodSample(name, ready=True, sampled_at=NOW, requests_per_second=rps, cache_used_ratio=0.5,
                     recent_models=models)


def demo_pod(name: str, created_at: float) -> DemoPod:
    return DemoPod(name, FakeModelMesh(ModelMeshLoad(models_loaded=6), model_prefix=name), 0, 0,
                   created_at=created_at, models=name, ready=True)


def test_the_hot_pod_whose_rate_trails_its_copies_goes_first_losing_no_model() -> None:
    own = {f"demo-1-model-{index}": NOW for index in range(6)}
    samples = [sample("demo-0", 40.0, HOT_MODELS), sample("demo-1", 10.0, own),
               sample("demo-4", 52.0, HOT_MODELS), sample("demo-5", 52.0, HOT_MODELS)]
    # by hand, the need (0.5 x rate / busiest + 2 x cache 0.5 + 1 x unique / most) / 3.5, to the bucket below:
    # demo-0 (0.5 x 40/52 + 1) / 3.5 = 0.40 (just under), the copies (0.5 + 1) / 3.5 = 0.43, demo-1 (0.5 x 10/52 +
    # 1 + 1) / 3.5 = 0.60 (just under)
    ranking = rank_pods(samples, default_terms(RuntimePolicy()), NOW)
    assert ranking.unique_models is not None
    ranked = {s.name: (cost, unique) for s, cost, unique in zip(samples, ranking.costs, ranking.unique_models,
                                                                strict=True) if cost is not None}
    assert ranked == {"demo-0": (300, 0), "demo-1": (500, 6), "demo-4": (400, 0), "demo-5": (400, 0)}
    pods = [demo_pod(name, created_at) for name, created_at in (("demo-0", 0), ("demo-1", 1), ("demo-4", 4),
                                                                  ("demo-5", 5))]
    assert scale_down(pods, ranked, 1) == [
        ("demo-0", "demo-0 (cost 300; lowest, next demo-4 at 400; its models have copies)")]
