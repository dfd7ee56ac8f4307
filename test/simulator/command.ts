/**
 * The `simulator` command: starts the simulator on 127.0.0.1, prints one JSON line
 * `{"url", "keys"}` first, then serves until SIGINT/SIGTERM. `npm run simulator` (main.ts) and
 * the packaged `campaign-report-exporter simulator` both call {@link simulatorCommand}.
 *
 * Kept apart from main.ts, which runs it when loaded: the CLI's dispatcher imports this module,
 * and in its single-file bundle `import.meta.main` would be true of every module alike.
 */
import { optionsFromArgs } from './cli-options.js';
import { DEFAULTS } from './dataset.js';
import { startSimulator } from './server.js';
import type { Simulator } from './types.js';

// The defaults are the simulator's own (DEFAULTS), so that the help cannot say other ones.
const USAGE = `Usage: campaign-report-exporter simulator [options]
       npm run --silent simulator -- [options]        (from a checkout)

Serves a seeded stand-in for the Integration API on 127.0.0.1.
Prints one JSON line {"url", "keys"} first (keys.valid is a working bearer key), then serves
until SIGINT/SIGTERM. Exit code 0 when stopped, 2 on a usage error.

Options (default in brackets):
  --port P             port to listen on; 0 takes any free port [0]
  --seed S             seed of the data, the keys, the faults and the latency jitter [${DEFAULTS.seed}]
  --campaigns N        number of campaigns [${DEFAULTS.campaigns}]
  --jobs N             jobs per campaign [${DEFAULTS.jobsPerCampaign}]
  --size tiny|small|mixed|large
                       size of the reports [${DEFAULTS.reportSize}]
  --latency MS         every answer leaves MS after its request (±20% jitter) [0]
  --rate R             token bucket per key: R requests a second [no rate limit]
  --burst B            the bucket's size, with --rate [R rounded up, at least 1]
  --window N/SECONDS   fixed window per key instead: N requests per SECONDS [no rate limit]
  --headers none|laravel|github|ietf
                       rate-limit headers of the window, with --window [none]
  --turn second|exact|ceil
                       where a Laravel window turns, with --headers laravel [second]
  -h, --help           this text`;

/**
 * Runs the simulator with `argv` (the flags after the command). Resolves to the exit code once
 * a SIGINT or SIGTERM has closed it: 0, or 1 when closing failed; 2 at once on bad flags.
 */
export async function simulatorCommand(argv: readonly string[]): Promise<number> {
  if (argv.includes('--help') || argv.includes('-h')) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  let simulator: Simulator;
  try {
    simulator = await startSimulator(optionsFromArgs([...argv]));
  } catch (error) {
    process.stderr.write(`simulator: ${error instanceof Error ? error.message : String(error)}\n`);
    return 2;
  }
  process.stdout.write(`${JSON.stringify({ url: simulator.url, keys: simulator.keys })}\n`);
  await new Promise<void>((resolve) => {
    process.once('SIGINT', () => resolve());
    process.once('SIGTERM', () => resolve());
  });
  return simulator.close().then(
    () => 0,
    () => 1,
  );
}
