/**
 * `npm start`, the embedded default: the API simulator on a free loopback port with a few
 * thousand jobs, a full export and an incremental re-run (only reports not ready last time are
 * asked for again) in each table format — Hive-style Parquet into ./out/demo, Iceberg tables
 * into ./out/demo-iceberg — then the example queries with DuckDB over Iceberg's current
 * snapshots (the `*_current` tables), each checked to give the answer the same query gives over
 * the Hive tables and their `*_latest` views.
 */
import { rm } from 'node:fs/promises';
import { resolve } from 'node:path';
import { QUERIES, queriesFor } from '../../shared/export/queries.js';
import { runExport } from '../../shared/export/run/local-run.js';
import { manifestKey } from '../../shared/layout.js';
import { RUN_DEFAULTS } from '../../shared/run-defaults.js';
import { startSimulator } from '../../test/simulator/index.js';
import { parseCli, runOptionsOf } from './config.js';
import { cliDeps, consoleLog } from './deps.js';
import { boundCliHeap } from './heap.js';
import { formatSummary, Progress } from './progress.js';
import { formatResult, openLakeSql } from './sql.js';

const OUT = { hive: resolve('out/demo'), iceberg: resolve('out/demo-iceberg') } as const;
const FORMATS = ['hive', 'iceberg'] as const;
/** A few thousand jobs: big enough to show throughput, small enough for under a minute. */
const DEMO_DATASET = { seed: 42, campaigns: 12, jobsPerCampaign: 250, reportSize: 'mixed' } as const;

async function main(): Promise<void> {
  for (const format of FORMATS) await rm(OUT[format], { recursive: true, force: true });
  const simulator = await startSimulator(DEMO_DATASET);
  const out = process.stdout;
  try {
    out.write(
      `Integration API simulator on ${simulator.url} (${DEMO_DATASET.campaigns} campaigns × ${DEMO_DATASET.jobsPerCampaign} jobs)\n\n`,
    );
    // The CLI's configuration at its defaults, but for the rate ceiling: the simulator runs without
    // a rate limit (no rateLimit given), so there is no API limit to stay politely below.
    for (const format of FORMATS) {
      const args = [
        '--out',
        OUT[format],
        '--max-rate',
        String(RUN_DEFAULTS.maxRate.max),
        '--table-format',
        format,
      ];
      const config = parseCli(args, {
        INTEGRATION_API_BASE_URL: simulator.url,
        INTEGRATION_API_KEY: simulator.keys.valid,
      });
      if (config === 'help') throw new Error('the demo asks for no help');
      const log = consoleLog('normal');
      const deps = cliDeps({ ...config, log });
      for (const mode of ['full', 'incremental'] as const) {
        out.write(`── ${mode} export, ${format} tables → ${OUT[format]}\n`);
        const progress = new Progress();
        const manifest = await runExport(deps, {
          ...runOptionsOf(config),
          mode,
          onProgress: progress.onEvent,
        });
        progress.finish(manifest.status);
        log.settle(manifest.status === 'failed');
        out.write(
          `${formatSummary(manifest, deps.storage.location, manifestKey(manifest.dt, manifest.run_id))}\n\n`,
        );
      }
    }
  } finally {
    await simulator.close();
  }

  const iceberg = await openLakeSql(OUT.iceberg);
  const hive = await openLakeSql(OUT.hive);
  try {
    const overIceberg = queriesFor('iceberg');
    for (const [i, query] of QUERIES.entries()) {
      // Over Iceberg the queries read the *_current tables; over Hive, the *_latest views.
      const sql = overIceberg[i]!.sql;
      out.write(`── ${query.name}: ${query.description}\n${sql}\n\n`);
      const answer = await iceberg.query(sql);
      const result = formatResult(answer);
      out.write(`${result}\n`);
      // The two exports hold the same reports (the simulator's data is seeded), under other run ids.
      if (!answer.columns.includes('run_id')) {
        if (formatResult(await hive.query(query.sql)) !== result) {
          throw new Error(`${query.name}: the Iceberg tables and the Hive tables answer differently`);
        }
        out.write(
          '(Iceberg current snapshot; the same query over the Hive tables and *_latest views agrees)\n',
        );
      }
      out.write('\n');
    }
  } finally {
    iceberg.close();
    hive.close();
  }
  out.write(
    `Files: ${OUT.hive}/{parquet,raw,runs}/… and ${OUT.iceberg}/{iceberg,raw,runs}/…\n` +
      'Query them yourself: npm run --silent sql -- --out out/demo (the same views; docs/query.md), ' +
      "or deploy with 'npx cdk deploy' for Athena (docs/deploy.md).\n",
  );
}

boundCliHeap();
main().catch((error: unknown) => {
  process.stderr.write(
    `demo failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
  );
  process.exitCode = 1;
});
