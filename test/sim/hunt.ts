/**
 * Finds, for each defect class of issue 16, seeds whose failure shows it, by reading the
 * failing seeds' traces: `npx tsx test/sim/hunt.ts [--from 1] [--seeds 2000] [--per 3]`.
 * The classes are recognised from what the trace shows; a seed may show several.
 */
import { parseArgs } from 'node:util';
import { runSeed, type SeedResult } from './scenario.js';

const { values } = parseArgs({
  options: { from: { type: 'string' }, seeds: { type: 'string' }, per: { type: 'string' } },
});
const from = Number(values.from ?? 1);
const count = Number(values.seeds ?? 2000);
const per = Number(values.per ?? 3);

interface Finding {
  cls: string;
  why: string;
}

const lines = (r: SeedResult) => r.trace.map((l) => `${l.actor} ${l.text}`);

function classify(r: SeedResult): Finding[] {
  const out: Finding[] = [];
  const text = lines(r);
  const has = (re: RegExp) => text.some((l) => re.test(l));
  for (const v of r.violations) {
    const run = v.runs[0] ?? '';
    if (v.invariant.startsWith('8')) {
      out.push({ cls: '(a) closed again from old records', why: v.message });
      if (
        /^cli#/.test(v.message) &&
        has(new RegExp(`closing a run left open by an interrupted exporter.*${run}`))
      ) {
        out.push({
          cls: "(a') a CLI re-closes from its records the run another run's recovery closed",
          why: v.message,
        });
      }
    }
    if (v.invariant.startsWith('3') && r.violations.some((w) => w.invariant.startsWith('8'))) {
      out.push({ cls: '(a) closed again from old records', why: `outcomes of a re-closing: ${v.message}` });
    }
    if (v.invariant.startsWith('4') && /\(cli#\d+\) wrote/.test(v.message) && /expired at/.test(v.message)) {
      out.push({ cls: '(b) CLI lock expired while the run starts', why: v.message });
    }
    if (v.invariant.startsWith('4') && /took the lock over/.test(v.message)) {
      out.push({ cls: '(h) lock taken from a live holder (clock skew)', why: v.message });
    }
    if (
      v.invariant.startsWith('1') &&
      has(new RegExp(`deleted the leftovers of a run that never recorded its start.*${run}`))
    ) {
      out.push({ cls: '(c) recovery deleted the staging of a starting run', why: v.message });
    }
    if (
      (v.invariant.startsWith('7') || v.invariant.startsWith('4')) &&
      has(/put state\/lock\.json if-(none-match|match \S+) → 412 \(SDK retry\)/)
    ) {
      out.push({ cls: '(d) lost answer, own write taken for another (lock)', why: v.message });
    }
    if (v.invariant.startsWith('1') && has(new RegExp(`put runs/dt=[^/]+/${run}\\.json → 409`))) {
      out.push({ cls: '(d) 409 on the manifest counted as written', why: v.message });
    }
    if (v.invariant.startsWith('1') && has(new RegExp(`put state/runs/${run}/closing\\.json → 409`))) {
      out.push({ cls: '(d) 409 on the closing record taken for another finisher', why: v.message });
    }
    if (r.scenario.duplicateDelivery > 0 && v.invariant.startsWith('2')) {
      out.push({ cls: '(e) concurrent duplicate deliveries', why: v.message });
    }
    if (
      r.scenario.duplicateDelivery > 0 &&
      v.invariant.startsWith('3') &&
      !v.message.includes('no manifest')
    ) {
      out.push({ cls: '(e) concurrent duplicate deliveries', why: v.message });
    }
    if (
      v.invariant.startsWith('1') &&
      has(new RegExp(`could not finish run.*${run}.*(reports_failed|too_small)`))
    ) {
      out.push({
        cls: '(e) concurrent duplicate deliveries',
        why: `manifest cannot be built (reports_failed < 0): ${v.message}`,
      });
    }
    if (v.invariant.startsWith('5') && /but no ExportRunFinished/.test(v.message)) {
      out.push({ cls: '(i) a queue-carried run closed without ExportRunFinished', why: v.message });
    }
    if (v.invariant.startsWith('5') && /announced \d+ times/.test(v.message)) {
      const announcers = r.trace
        .filter((l) => l.text.startsWith(`ExportRunFinished ${run}`))
        .map((l) => l.actor);
      const crashed = r.trace.some((l) => announcers.includes(l.actor) && l.text.startsWith('CRASH'));
      if (new Set(announcers).size > 1 && !crashed) {
        out.push({
          cls: '(f) overlapping finish-runs announce twice',
          why: `${v.message} by ${announcers.join(', ')}`,
        });
      } else {
        out.push({
          cls: "(f') a crash between the event and its record",
          why: `${v.message} by ${announcers.join(', ')}`,
        });
      }
    }
    if (v.invariant.startsWith('7')) {
      const holder = /taken by ((?:start-run|cli)#\d+)/.exec(v.message)?.[1];
      const wroteRecord = has(new RegExp(`put state/runs/${run}/run\\.json ok`));
      const holderCrashed =
        holder !== undefined && r.trace.some((l) => l.actor === holder && l.text.startsWith('CRASH'));
      if (holder?.startsWith('start-run') && holderCrashed && !wroteRecord) {
        out.push({ cls: '(g) start-run died between the lock and its run record', why: v.message });
      }
      const closer = r.trace.find((l) => l.text === `delete state/runs/${run}/closing.json ok`)?.actor;
      if (closer && r.trace.some((l) => l.actor === closer && l.text.startsWith('CRASH'))) {
        out.push({ cls: '(g) finish-run died between the closing record and the release', why: v.message });
      }
      if (has(/put state\/lock\.json.* → 503/)) {
        out.push({ cls: "(g') a release that failed (503) left the lock to its TTL", why: v.message });
      }
    }
  }
  return out;
}

const found = new Map<string, Array<{ seed: number; why: string }>>();
const started = Date.now();
for (let seed = from; seed < from + count; seed++) {
  const quick = await runSeed(seed);
  if (quick.violations.length === 0) continue;
  const traced = await runSeed(seed, { trace: true });
  for (const f of classify(traced)) {
    const seeds = found.get(f.cls) ?? [];
    if (!seeds.some((s) => s.seed === seed)) seeds.push({ seed, why: f.why });
    found.set(f.cls, seeds);
  }
}
console.log(`${count} seeds from ${from} in ${((Date.now() - started) / 1000).toFixed(0)}s`);
for (const [cls, seeds] of [...found].sort()) {
  console.log(
    `\n${cls}: ${seeds.length} seed(s): ${seeds
      .map((s) => s.seed)
      .slice(0, 20)
      .join(', ')}`,
  );
  for (const s of seeds.slice(0, per)) console.log(`  seed ${s.seed}: ${s.why.slice(0, 400)}`);
}
