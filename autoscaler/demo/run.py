"""`modelmesh-autoscaler demo`: the whole loop on one machine, in about a minute.

Fake ModelMesh containers (https, like the real ones) run in this process with load that changes by phase;
one real `modelmesh-exporter` process per pod reads them; one real `modelmesh-autoscaler serve` process
scrapes the exporters and serves the external metrics API. The HPA is the documented one
(`autoscaler.simulation.hpa`, the model the simulator uses): it reads `modelmesh_desired_replicas` from the
adapter's real API, and the demo really starts and stops pods, removing the one with the lowest deletion
cost as the ReplicaSet would. Time is compressed: the adapter's scale-down time constant (300 s shipped, the
one slow-down rail) is 5 s here, so a person sees replicas follow the hot model up and come down slowly.
The phases count from the adapter's first served value, and the traffic drop waits for the pods a scale-up is
still starting, and for the adapter to rank them (`Demo.unranked`): on a slow machine the clock once started with
the processes, and the story was over before the adapter served anything (`first_value`,
`Phase.waits_for_starting_pods`).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import aiohttp

from autoscaler.demo.arguments import DEMO_MAX_PODS
from autoscaler.demo.average_blind_spot import blind_spot_line
from autoscaler.demo.fleet import DEPLOYMENT, NAMESPACE, DemoFleet, DemoPod
from autoscaler.demo.hot_model import hot_model_pods, pod_loads
from autoscaler.demo.pod_costs import costs_on_pods
from autoscaler.demo.removals import removal_preview, scale_down
from autoscaler.demo.report_lines import POD_TABLE_HEADER, RATE_PER_POD, average_hpa_line, pod_table_row, served_value
from autoscaler.demo.say import say, say_as_is, say_command
from autoscaler.demo.scale_reasons import served_replicas, why_scaled
from autoscaler.demo.scenario import DEMO_BEHAVIOR, DESIRED, PHASES, SCALE_DOWN_TAU_S, TARGET_RPS_PER_POD, Phase
from autoscaler.demo.short_run import StoryProgress, not_shown
from autoscaler.names import GROUP_VERSION, ServedMetric
from autoscaler.simulation.hpa import HorizontalPodAutoscaler
from autoscaler.simulation.hpa_manifest import describe_behavior
from autoscaler.simulation.hpa_spec import HpaPod, HpaSpec

HPA_SYNC_S = 2.0
ADAPTER_TIMEOUT_S = 2.0
"""How long the demo waits for each answer of its adapter and exporters (the metrics API, /debug, /metrics): within
one HPA sync. The adapter answers in milliseconds even with 2 cores busy; past this, the scale line says the reason
is unknown this time (`scale_reasons.why_scaled`) rather than hold the HPA's loop back."""


class DemoError(Exception):
    """The demo cannot go on (its adapter stopped); the message says why, in one line."""


class Demo:
    def __init__(self, pods: int, duration: float, interval: float, workdir: Path, max_pods: int | None = None,
                 start_timeout: float = 60.0) -> None:
        self.initial, self.duration, self.interval = pods, duration, interval
        self.start_timeout = start_timeout
        self.spec = HpaSpec((DESIRED,), min_replicas=min(2, pods),
                            max_replicas=max_pods or min(2 * pods, DEMO_MAX_PODS), behavior=DEMO_BEHAVIOR)
        # In a cluster the adapter reads the HPA's bounds (docs/design.md); here they are handed to it.
        self.fleet = DemoFleet(workdir, {"target_rps_per_pod": TARGET_RPS_PER_POD,
                                         "scale_down_tau_s": SCALE_DOWN_TAU_S,
                                         "min_replicas": self.spec.min_replicas,
                                         "max_replicas": self.spec.max_replicas})
        self.hpa = HorizontalPodAutoscaler(self.spec)
        self.started = time.monotonic()
        self.held = 0.0  # seconds a phase waited for pods still starting: the scenario's clock stood still
        self.held_for: Phase | None = None  # the phase that waited (it says so once)
        # The cost on each pod, as the adapter writes them (`ranked_pods`, `pod_costs`), and the pods with one: a
        # Ready pod without is read as cost 0 by the ReplicaSet, so the drop waits for it as for a pod still starting.
        self.costs: dict[str, tuple[int, int | None]] = {}
        self.ranked: frozenset[str] = frozenset()
        self.hot_model: str | None = None  # the hot model's id: the first pod's first model (`apply_phase`)
        self.hot_copies = 0  # the most Ready pods holding the hot model while it was hot (`apply_phase`)
        self.debug_missed = "did not answer"  # how the last /debug read failed, where it did (`debug`)
        self.shown_costs: dict[str, int] = {}  # the costs the last table showed, which a removal's line compares
        self.phase = PHASES[0]
        self.progress = StoryProgress()  # what the run has shown, for what its end says it did not (`not_shown`)

    @property
    def workdir(self) -> Path:
        return self.fleet.workdir

    def elapsed(self) -> float:
        """Seconds since the adapter served its first value: the time printed with each table."""
        return time.monotonic() - self.started

    def scenario_time(self, elapsed: float) -> float:
        """Where the phases are at `elapsed`: less what a phase waited for starting pods."""
        return elapsed - self.held

    def unranked(self) -> list[str]:
        """The Ready pods the adapter had not ranked at the last look: it ranks a pod at its first refresh after the
        pod's exporter answered, and until then the ReplicaSet reads the pod's missing cost as 0."""
        return [p.name for p in self.fleet.pods if p.ready and p.name not in self.ranked]

    def next_phase(self, elapsed: float) -> Phase:
        """The phase due at `elapsed`; one that waits for starting pods holds the scenario's clock at its start
        while any pod is starting or not yet ranked by the adapter (`unranked`), for at most `start_timeout` (the
        pod still starting then is removed first, then one not ranked)."""
        due = [p for p in PHASES if self.scenario_time(elapsed) >= p.starts_at * self.duration][-1]
        starting = [p.name for p in self.fleet.pods if not p.ready]
        waiting = starting + self.unranked()
        if due is self.phase or not due.waits_for_starting_pods or not waiting:
            return due
        waited = self.scenario_time(elapsed) - due.starts_at * self.duration
        if self.held + waited > self.start_timeout:
            why = (f"{', '.join(starting)} still starting after {self.start_timeout:g} s (--start-timeout): a pod "
                   "not Ready is the first a scale-down removes" if starting else
                   f"{', '.join(waiting)} not ranked by the adapter after {self.start_timeout:g} s (--start-timeout): "
                   "a pod without a deletion cost is read as 0, the first a scale-down removes")
            say(f"\n[{elapsed:4.0f}s] {due.title.split(':')[0]} with {why}")
            return due
        if due is not self.held_for:
            self.held_for = due
            one = len(waiting) == 1
            say(f"\n[{elapsed:4.0f}s] {due.title.split(':')[0]} once {', '.join(waiting)} "
                f"{'has' if one else 'have'} started and the adapter has ranked {'it' if one else 'them'} "
                f"(waiting at most {self.start_timeout:g} s, --start-timeout)")
        self.held += waited
        return self.phase

    async def advance(self, session: aiohttp.ClientSession) -> None:
        """Give the pods the load of the phase due now (`next_phase`): one step of the demo's loop. It reads the
        adapter's ranking first while a Ready pod has none (just after a scale-up), for the drop that waits for it."""
        if self.unranked():
            await self.ranked_pods(session)
        self.step(self.elapsed())

    def step(self, elapsed: float) -> None:
        """Apply the phase due at `elapsed` (`next_phase`), saying so where it is a new one: the phase's title came
        only with the periodic table, and a scale-up the new load caused was printed before the load."""
        phase = self.next_phase(elapsed)
        if phase is not self.phase:
            say(f"\n[{elapsed:4.0f}s] phase {PHASES.index(phase) + 1} of {len(PHASES)} begins: {phase.title}")
            if phase is PHASES[-1]:
                self.progress.dropped_at = elapsed
        self.apply_phase(phase)

    def apply_phase(self, phase: Phase) -> None:
        """Set every fake pod's load for `phase`: its background spread over the Ready pods, the hot model over its
        copies, the oldest Ready pod and each Ready pod holding copies of its models, least busy first
        (`hot_model.pod_loads`)."""
        self.phase = phase
        if not self.fleet.pods:
            return
        if self.hot_model is None:
            self.hot_model = self.fleet.pods[0].fake.model_ids[0]
        hot_model = self.hot_model
        ready = [p for p in self.fleet.pods if p.ready]
        # The hot model's pods: those holding it (the oldest, the added ones with copies of its models, and each
        # kept pod it was loaded again on), even once a scale-down removed the oldest: its copies serve on. While it
        # is hot it keeps as many copies as it had: one whose pod was removed is loaded again on a kept pod
        # (`hot_model.hot_model_pods`), which holds it from then on, beside its own models.
        holders = [p.name for p in ready if hot_model in p.fake.model_ids]
        # Hot: more than one pod's worth. After the drop (30 req/s) ModelMesh keeps no copy for load, and "loads
        # the hot model again" was said of a model no pod was busy with.
        hot = phase.hot > TARGET_RPS_PER_POD
        if hot:
            self.hot_copies = max(self.hot_copies, len(holders))
        copies = hot_model_pods([p.name for p in ready], holders, self.hot_copies if hot else 1)
        if moved := [p for p in ready if p.name in copies and p.name not in holders]:
            # Loaded there: its exporter reports the pod serving it, and the table's "models only it served" no
            # longer counts it for the pods that held it (demo-0 read 6 though demo-1 held the hot model).
            for pod in moved:
                pod.fake.load_copy(hot_model)
            say(f"\n[{self.elapsed():4.0f}s] ModelMesh loads the hot model again on "
                f"{', '.join(p.name for p in moved)}: a copy's pod was removed, and a hot model keeps its copies")
        loads = pod_loads([p.name for p in ready], copies, phase.background_per_pod * self.initial, phase.hot)
        for pod in self.fleet.pods:
            rps = round(loads.get(pod.name, 0.0), 6)
            if pod.fake.load.requests_per_second != rps:
                pod.fake.update(requests_per_second=rps, queue_delay_ms=80.0 if rps > 1.2 * TARGET_RPS_PER_POD
                                else 2.0)

    def _url(self, path: str) -> str:
        return f"https://127.0.0.1:{self.fleet.adapter_port}{path}"

    async def answer(self, session: aiohttp.ClientSession, metric: ServedMetric) -> tuple[int, dict[str, Any]] | None:
        """The metrics API's status and body for the demo's runtime; None while the adapter does not answer."""
        url = self._url(f"/apis/{GROUP_VERSION}/namespaces/{NAMESPACE}/{metric.value}"
                        f"?labelSelector=deployment%3D{DEPLOYMENT}")
        try:
            async with session.get(url, ssl=False, timeout=aiohttp.ClientTimeout(total=ADAPTER_TIMEOUT_S)) as response:
                return response.status, await response.json()
        except (aiohttp.ClientError, TimeoutError, ValueError):
            return None

    async def served(self, session: aiohttp.ClientSession, metric: ServedMetric) -> tuple[str, float | None]:
        """(what to print, the value or None when the API did not serve one)."""
        return served_value(metric, await self.answer(session, metric))

    async def exporter_rps(self, session: aiohttp.ClientSession, pod: DemoPod) -> float | None:
        try:
            async with session.get(f"http://127.0.0.1:{pod.exporter_port}/metrics",
                                   timeout=aiohttp.ClientTimeout(total=ADAPTER_TIMEOUT_S)) as response:
                text = await response.text()
        except (aiohttp.ClientError, TimeoutError):
            return None
        for line in text.splitlines():
            if line.startswith("modelmesh_pod_requests_per_second "):
                return float(line.split()[1])
        return None

    async def debug(self, session: aiohttp.ClientSession) -> dict[str, Any] | None:
        """The adapter's `/debug` explanation of the demo's runtime; None where it does not answer, and then
        `debug_missed` says how (for the scale line, `scale_reasons.why_scaled`)."""
        try:
            async with session.get(self._url(f"/debug/runtimes/{NAMESPACE}/{DEPLOYMENT}"), ssl=False,
                                   timeout=aiohttp.ClientTimeout(total=ADAPTER_TIMEOUT_S)) as response:
                if response.status != 200:
                    self.debug_missed = f"answered {response.status}"
                    return None
                body = await response.json()
        except TimeoutError:
            self.debug_missed = f"did not answer within {ADAPTER_TIMEOUT_S:g} s"
            return None
        except aiohttp.ClientError:
            self.debug_missed = "could not be reached"
            return None
        except ValueError:
            self.debug_missed = "answered no JSON"
            return None
        if not isinstance(body, dict):
            self.debug_missed = "answered no JSON object"
            return None
        return body

    async def ranked_pods(self, session: aiohttp.ClientSession,
                          debug: dict[str, Any] | None = None) -> dict[str, tuple[int, int | None]]:
        """The deletion cost on each pod and its unique copies (models only it served lately), as the adapter's
        `/debug` explanation (`debug`, else read now) shows them written (`pod_costs.costs_on_pods`: not the cost
        it lists for a pod it writes none on); pods without one are left out. The costs known before where /debug
        does not answer. An answer also sets `ranked`."""
        body = debug if debug is not None else await self.debug(session)
        if body is None:
            return dict(self.costs)
        self.costs = costs_on_pods(body, self.costs)
        self.ranked = frozenset(self.costs)
        return dict(self.costs)

    async def autoscale(self, session: aiohttp.ClientSession) -> None:
        """The HPA controller: every sync, read the metric, decide, and act on the replicas."""
        while True:
            await asyncio.sleep(HPA_SYNC_S)
            # The value and the adapter's account of it (why it scales) from one /debug document: read in two
            # requests they could come from two refreshes; the metrics API where /debug does not answer.
            debug = await self.debug(session)
            desired = served_replicas(debug)
            if debug is None:
                _, desired = await self.served(session, ServedMetric.DESIRED_REPLICAS)
            pods = self.fleet.pods
            decision = self.hpa.sync(self.elapsed(), len(pods), [HpaPod(p.name, p.ready) for p in pods],
                                     {DESIRED.name: desired})
            if not decision.changed:
                continue
            removed: list[str] = []
            added: list[str] = []  # named: a pod started after the traffic drop is told from one before it
            if decision.desired > decision.current:
                self.progress.scaled_up = True
                for _ in range(decision.desired - decision.current):
                    added.append((await self.fleet.add_pod()).name)
            else:
                if self.progress.dropped_at is not None:
                    self.progress.scaled_down_after_drop = True
                ranked = await self.ranked_pods(session, debug)
                for name, words in scale_down(pods, ranked, decision.current - decision.desired, self.shown_costs):
                    removed.append(words)
                    await self.fleet.remove_pod(name)
            what = f"; removed {'; '.join(removed)}" if removed else f"; added {', '.join(added)}" if added else ""
            say(f"\n[{self.elapsed():4.0f}s] HPA: {decision.reason} ({why_scaled(debug, self.debug_missed)}){what}")
            self.apply_phase(self.phase)  # the load moves with the pods now, not at the scenario's next step

    async def report(self, session: aiohttp.ClientSession) -> None:
        asked = list(self.fleet.pods)
        rates = dict(zip(asked, await asyncio.gather(*(self.exporter_rps(session, pod) for pod in asked)),
                         strict=True))
        answers = {m: await self.served(session, m) for m in ServedMetric}
        served = {m: shown for m, (shown, _) in answers.items()}
        adapter_ranked = await self.ranked_pods(session)
        # The pods running now, once every answer is in: the HPA loop runs during those awaits, and a pod it removed
        # meanwhile was listed (and counted) right under the line saying it was removed; one it started meanwhile
        # is listed as starting, its exporter not asked. The adapter ranks the pods of its last refresh: a pod
        # removed since then is not in the table, nor in the order below it.
        pods = list(self.fleet.pods)
        listed = {pod.name for pod in pods}
        ranked = {name: shown for name, shown in adapter_ranked.items() if name in listed}
        costs = {name: cost for name, (cost, _) in ranked.items()}
        ready = sum(1 for p in pods if p.ready)
        say(f"\n[{self.elapsed():4.0f}s] {self.phase.title}")
        say(f"  replicas {len(pods)} ({ready} ready)")
        say_as_is(POD_TABLE_HEADER)
        for pod in pods:
            cost, unique = ranked.get(pod.name, (None, None))
            say_as_is(pod_table_row(pod.name, pod.fake.load.requests_per_second, rates.get(pod), cost, unique,
                                    pod.ready))
        self.shown_costs = costs
        known = {pod.name: rate for pod in pods if (rate := rates.get(pod)) is not None}
        hpa_pods = [HpaPod(p.name, p.ready) for p in pods]
        if (line := average_hpa_line(hpa_pods, known, self.spec)) is not None:
            say(line)
        true_rates = {pod.name: pod.fake.load.requests_per_second for pod in pods if pod.ready}
        if (line := blind_spot_line(RATE_PER_POD, hpa_pods, true_rates, self.spec.tolerances,
                                    self.spec.max_replicas)) is not None:
            say(line)
        # One blank between the values: a line wrapped at two blanks reads back with one (`say`).
        say(f"  adapter serves: request_load={served[ServedMetric.REQUEST_LOAD]} "
            f"desired_replicas={served[ServedMetric.DESIRED_REPLICAS]} "
            f"cache_pressure={served[ServedMetric.CACHE_PRESSURE]} gpu_busy={served[ServedMetric.GPU_BUSY]}")
        # Costs are written only while the runtime's values are known (docs/design.md, Choosing the pod to
        # remove): before the first served value, the ranking the adapter shows is not on the pods yet
        written = answers[ServedMetric.DESIRED_REPLICAS][1] is not None
        if written and (line := removal_preview(costs, [pod.name for pod in pods])) is not None:
            say(line)

    def describe_policy(self) -> str:
        return (f"policy: HPA on {DESIRED.describe()}, replicas {self.spec.min_replicas}..{self.spec.max_replicas}, "
                f"sync every {HPA_SYNC_S:g} s; behavior {describe_behavior(DEMO_BEHAVIOR)} (the shipped one, "
                f"periods compressed); adapter target_rps_per_pod {TARGET_RPS_PER_POD:g}, scale_down_tau_s "
                f"{SCALE_DOWN_TAU_S:g} (300 shipped, compressed): the one slow-down rail; the ReplicaSet removes "
                f"the pod with the lowest deletion cost")

    def describe_start(self, adapter_port: int) -> str:
        pods = f"{self.initial} fake ModelMesh pod{'s' if self.initial != 1 else ''}"
        exporters = f"{self.initial} exporter{'s' if self.initial != 1 else ''}"
        return (f"demo: {pods}, {exporters}, adapter on https://127.0.0.1:{adapter_port} (logs in "
                f"{self.workdir}/processes.log, kept if the demo fails)")

    async def first_value(self, session: aiohttp.ClientSession) -> None:
        """Wait for the adapter to serve the runtime's first desired replicas, the first pods' even load on them.

        The scenario's clock starts then, not when the processes answer: on a slow machine the adapter answered
        "starting", then 503, until 25 s of a 40 s run, and the hot model had gone before it served a value."""
        say(f"waiting for the adapter's first value for {NAMESPACE}/{DEPLOYMENT} (at most "
            f"{self.start_timeout:g} s, --start-timeout)")
        self.apply_phase(PHASES[0])
        waiting_since = time.monotonic()
        port = self.fleet.adapter_port
        while True:
            if (failure := self.fleet.adapter_failure()) is not None:
                raise DemoError(failure)
            if self.fleet.adapter_port != port:
                port = self.fleet.adapter_port
                say(f"the adapter's port was taken by another program before it listened; it listens on "
                    f"https://127.0.0.1:{port} instead")
            answered = await self.answer(session, ServedMetric.DESIRED_REPLICAS)
            shown, value = served_value(ServedMetric.DESIRED_REPLICAS, answered)
            if value is not None:
                say(f"the adapter serves desired_replicas={shown} after {time.monotonic() - waiting_since:.0f} s: "
                    f"the scenario starts")
                return
            if time.monotonic() - waiting_since >= self.start_timeout:
                said = ("none (it does not take connections yet)" if answered is None else
                        f"{shown}: {answered[1].get('message', '')}")
                raise DemoError(f"the adapter served no {ServedMetric.DESIRED_REPLICAS.value} for {NAMESPACE}/"
                                f"{DEPLOYMENT} within {self.start_timeout:g} s (--start-timeout; on a slower "
                                f"machine give it longer, e.g. --start-timeout {max(2 * self.start_timeout, 60):g}); "
                                f"its last answer: {said}")
            self.apply_phase(PHASES[0])  # the pods that became Ready meanwhile share the load
            await asyncio.sleep(0.5)

    async def run(self) -> None:
        async with self.fleet.running(self.initial), aiohttp.ClientSession() as session:
            say(self.describe_start(self.fleet.adapter_port))
            say(self.describe_policy())
            # In double quotes: a URL wrapped with the shell's backslash-newline reads back whole there (`say`).
            say_command(f'try: curl -sk "https://127.0.0.1:{self.fleet.adapter_port}/apis/{GROUP_VERSION}/namespaces/'
                        f'{NAMESPACE}/modelmesh_desired_replicas?labelSelector=deployment%3D{DEPLOYMENT}"')
            await self.first_value(session)
            self.started = time.monotonic()
            say(f"\n[{0:4.0f}s] phase 1 of {len(PHASES)} begins: {self.phase.title}")
            hpa = asyncio.create_task(self.autoscale(session))
            try:
                next_report = self.interval
                while (now := self.scenario_time(self.elapsed())) < self.duration:
                    if (failure := self.fleet.adapter_failure()) is not None:
                        raise DemoError(failure)
                    if hpa.done() and isinstance(gone := hpa.exception(), BrokenPipeError):
                        raise gone  # the HPA's line found the reader gone: the demo ends as on any line (`command`)
                    await self.advance(session)
                    await asyncio.sleep(min(0.5, max(0.0, self.duration - now)))
                    if self.elapsed() >= next_report:
                        next_report += self.interval
                        await self.report(session)
            finally:
                hpa.cancel()
                await asyncio.gather(hpa, return_exceptions=True)
            await self.say_what_was_not_shown(session)
        say("\ndemo finished: every process stopped.")

    async def say_what_was_not_shown(self, session: aiohttp.ClientSession) -> None:
        """At the end of a run too short for its story, what it did not show and why (`short_run`)."""
        shown, _ = await self.served(session, ServedMetric.DESIRED_REPLICAS)
        for line in not_shown(self.progress, elapsed=self.elapsed(), duration=self.duration,
                              replicas=len(self.fleet.pods), min_replicas=self.spec.min_replicas,
                              max_replicas=self.spec.max_replicas, initial=self.initial, desired=shown,
                              tau_s=SCALE_DOWN_TAU_S):
            say(f"\n[{self.elapsed():4.0f}s] {line}")
