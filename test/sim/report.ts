/** Printing a seed's result: its violations and the trace lines that concern them. */
import { EPOCH, type SeedResult } from './scenario.js';
import type { TraceLine } from './scheduler.js';

export const formatLine = (line: TraceLine): string =>
  `T+${((line.t - EPOCH) / 1000).toFixed(3).padStart(10)}s ${line.actor.padEnd(16)} ${line.text}`;

/** The scenario in a line. */
export function describeScenario(result: SeedResult): string {
  const s = result.scenario;
  return [
    `profile ${s.profile}`,
    `skew ±${s.skewMs / 1000}s`,
    `${s.starts.length} start(s)${s.starts.some((x) => x.duplicate !== 'none') ? ' (duplicated)' : ''}`,
    `${s.clis.length} CLI run(s)`,
    `finish overlap ${s.finishOverlap} within ${s.finishOverlapWithinMs / 1000}s`,
    `finish hands on ${s.finishHandsOn}`,
    `${s.settings.tableFormat}`,
    `duplicate deliveries ${s.duplicateDelivery}`,
    `unit size ${s.settings.unitSize}`,
  ].join(', ');
}

/**
 * A seed's failure: seed, scenario, each violation, and the last `lines` trace lines that name
 * a run the first violation is about (or the last lines, when it names none).
 */
export function formatFailure(result: SeedResult, lines = 40): string {
  const out = [`seed ${result.seed} FAILED (${describeScenario(result)})`];
  for (const v of result.violations) out.push(`  [${v.invariant}] ${v.message}`);
  const runs = result.violations[0]?.runs ?? [];
  const relevant =
    runs.length === 0
      ? result.trace
      : result.trace.filter(
          (l) =>
            runs.some((r) => l.text.includes(r)) ||
            l.text.includes('CRASH') ||
            l.text.startsWith('VIOLATION'),
        );
  if (relevant.length > 0) {
    out.push(
      `  trace (last ${Math.min(lines, relevant.length)} of ${relevant.length} lines about ${runs.join(', ') || 'the seed'}):`,
    );
    for (const line of relevant.slice(-lines)) out.push(`    ${formatLine(line)}`);
  }
  out.push(`  replay: npm run sim -- --seed ${result.seed} --trace`);
  return out.join('\n');
}
