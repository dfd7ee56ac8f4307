/**
 * Standalone simulator: `npm run simulator -- --port P --seed S [--campaigns N] [--jobs N]
 * [--rate R --burst B | --window N/SECONDS [--headers none|laravel|github|ietf]] [--latency MS]
 * [--size tiny|small|mixed|large]`. Prints one JSON line `{"url", "keys"}` first, then serves
 * until SIGINT/SIGTERM.
 */
import { optionsFromArgs } from './cli-options.js';
import { startSimulator } from './server.js';

async function main(): Promise<void> {
  const simulator = await startSimulator(optionsFromArgs(process.argv.slice(2)));
  process.stdout.write(`${JSON.stringify({ url: simulator.url, keys: simulator.keys })}\n`);
  const stop = () => {
    simulator.close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}

main().catch((error: unknown) => {
  process.stderr.write(`simulator: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(2);
});
