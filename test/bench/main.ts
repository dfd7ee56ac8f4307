/**
 * `npm run bench [section ...]`: every benchmark, or the named sections. Figures print as
 * tables; BENCHMARKS.md records a run. Sections: client, encode, export, cli-memory, cost, lambda, unit-memory,
 * topology, parquet-scan, publish, regroup, cli-startup, iceberg-metadata, iceberg-current,
 * iceberg-current-scale, windows, scale, freeze,
 * campaign-listing, rescue.
 * `regroup` takes its run sizes from REGROUP_SIZE_REPORTS (default 10,000) and
 * REGROUP_TIME_REPORTS (default 100,000); `scale` its settings from SCALE_* (see scale.ts).
 * Targets are compared as ratios measured within one run: these machines are shared and noisy.
 */
import { benchCampaignListing } from './campaign-listing.js';
import { benchCliStartup } from './cli-startup.js';
import { benchClient } from './client.js';
import { benchCost } from './cost.js';
import { benchEncode } from './encode.js';
import { benchCliMemory, benchExport } from './export-main.js';
import { benchFreeze } from './freeze.js';
import { benchIcebergCurrent } from './iceberg-current.js';
import { benchIcebergCurrentScale } from './iceberg-current-scale.js';
import { benchIcebergMetadata } from './iceberg-metadata.js';
import { benchLambda } from './lambda.js';
import { benchParquetScan } from './parquet-scan.js';
import { benchPublish } from './publish.js';
import { benchRegroup } from './regroup.js';
import { benchRescue } from './rescue.js';
import { benchScale } from './scale.js';
import { benchTopology } from './topology.js';
import { benchUnitMemory } from './unit-memory.js';
import { benchShortRuns, benchWindows } from './windows.js';

const SECTIONS: Record<string, () => Promise<Record<string, number>>> = {
  client: benchClient,
  encode: () => benchEncode(),
  export: benchExport,
  'cli-memory': benchCliMemory,
  cost: benchCost,
  lambda: benchLambda,
  'unit-memory': benchUnitMemory,
  topology: benchTopology,
  'parquet-scan': () => benchParquetScan(),
  publish: benchPublish,
  regroup: () =>
    benchRegroup(
      Number(process.env.REGROUP_SIZE_REPORTS ?? 10_000),
      Number(process.env.REGROUP_TIME_REPORTS ?? 100_000),
    ),
  'cli-startup': benchCliStartup,
  'iceberg-metadata': benchIcebergMetadata,
  'iceberg-current': benchIcebergCurrent,
  'iceberg-current-scale': benchIcebergCurrentScale,
  windows: async () => ({ ...(await benchWindows()), ...(await benchShortRuns()) }),
  scale: benchScale,
  freeze: benchFreeze,
  'campaign-listing': benchCampaignListing,
  rescue: benchRescue,
};

function print(name: string, figures: Record<string, number>): void {
  const width = Math.max(...Object.keys(figures).map((k) => k.length));
  process.stdout.write(`\n== ${name}\n`);
  for (const [key, value] of Object.entries(figures)) {
    const shown = Number.isInteger(value) ? String(value) : value.toFixed(3);
    process.stdout.write(`  ${key.padEnd(width)}  ${shown}\n`);
  }
}

async function main(): Promise<void> {
  const asked = process.argv.slice(2);
  const unknown = asked.filter((s) => !(s in SECTIONS));
  if (unknown.length > 0)
    throw new Error(`unknown section(s) ${unknown.join(', ')}; have ${Object.keys(SECTIONS).join(', ')}`);
  const all: Record<string, Record<string, number>> = {};
  for (const name of asked.length > 0 ? asked : Object.keys(SECTIONS)) {
    const figures = await SECTIONS[name]!();
    all[name] = figures;
    print(name, figures);
  }
  process.stdout.write(`\n${JSON.stringify({ date: new Date().toISOString(), results: all })}\n`);
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exitCode = 1;
});
