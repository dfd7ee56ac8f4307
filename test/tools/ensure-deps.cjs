// The pre-script of the npm scripts that run the project (package.json `pre<name>`). Two jobs:
//
// 1. Installs the project's dependencies from package-lock.json when they are missing or older
//    than the lockfile, so that `npm start` and `npm test` work on a fresh clone by themselves.
// 2. Checks the Node the script will run on, and stops it (exit 2, one line) when that Node is
//    older than package.json `engines` says.
//
// Runs before the dependencies exist, so it is plain CommonJS for the machine's own Node 20.
// `npm run` puts node_modules/.bin first on PATH, and the devDependency `node` puts Node 24
// there: the scripts (tsx, cdk) start it through their `#!/usr/bin/env node` line. So the Node
// that matters is the first `node` on PATH once the install is done; this file itself may run
// on an older one, the one that was first before node_modules/.bin/node existed.
//
// Why `npm install --no-save` and not `npm ci` or a plain `npm install`: `npm install` reads
// package-lock.json and installs the locked versions, as `npm ci` does, but unless told
// `--no-save` it also writes the lockfile back as this npm would have resolved it (adding or
// dropping other platforms' optional packages, biome's and DuckDB's native builds, depending on
// the npm that wrote it last), which leaves a fresh clone's `git status` dirty. `npm ci` would
// not write, but it refuses a lockfile its npm would have written otherwise. Changing the
// dependencies stays a developer's own `npm install <name>`, which writes the lockfile.
//
// package.json `allowScripts` says which install scripts npm runs; `classic-level` (dynalite's
// LevelDB, test-only) is denied by name, which keeps npm from warning about it: its install
// script only compiles LevelDB when none of the prebuilt binaries it ships fits the platform.
const { execFileSync, spawnSync } = require('node:child_process');
const { existsSync, statSync } = require('node:fs');
const { join } = require('node:path');
const { nodeVersionProblem } = require('../../functions/cli/node-version.cjs');

const root = join(__dirname, '..', '..');
const installed = join(root, 'node_modules', '.package-lock.json');
const lock = join(root, 'package-lock.json');
const node24 = join(root, 'node_modules', '.bin', 'node');
const engines = require(join(root, 'package.json')).engines.node;

const stale =
  !existsSync(installed) || !existsSync(node24) || statSync(installed).mtimeMs < statSync(lock).mtimeMs;
if (stale) {
  process.stderr.write('Installing dependencies from package-lock.json (Node 24 included)…\n');
  install();
}

/**
 * `npm install --no-save`, its stderr passed on but for npm's EBADENGINE warnings: on an older
 * machine Node (20 here) npm warns once per package that wants Node 22 or later (a dozen lines
 * each, the project itself among them), though no script runs on that Node: they run on the
 * Node 24 this install puts into node_modules/.bin, and the check below stops any that would not.
 * One line says they were left out; every other warning and error is passed on as npm wrote it.
 */
function install() {
  const npm = spawnSync('npm', ['install', '--no-save', '--no-audit', '--no-fund'], {
    cwd: root,
    stdio: ['inherit', 'inherit', 'pipe'],
    encoding: 'utf8',
    shell: process.platform === 'win32', // npm is npm.cmd there, which spawn does not find by itself
  });
  if (npm.error !== undefined) {
    process.stderr.write(
      `error: could not start npm (${npm.error.message}); install Node with npm, then run \`npm install\`\n`,
    );
    process.exit(1);
  }
  const engine = /^npm warn EBADENGINE\b/;
  const lines = npm.stderr.split('\n');
  const packages = lines.filter((line) => /^npm warn EBADENGINE +package: /.test(line)).length;
  process.stderr.write(lines.filter((line) => !engine.test(line)).join('\n'));
  if (packages > 0) {
    process.stderr.write(
      `(npm's warnings that ${packages} packages want a newer Node than ${process.version} left out: the scripts run on the Node 24 just installed into node_modules/.bin)\n`,
    );
  }
  if (npm.status !== 0) {
    process.stderr.write(
      `error: npm install exited with ${npm.status ?? npm.signal}; its lines above say why\n`,
    );
    process.exit(npm.status ?? 1);
  }
}

/**
 * The version of the first `node` on PATH. Unless the install just put node_modules/.bin/node
 * there, that is the one running this file: `npm run` started it as `node …` on the same PATH.
 */
function scriptNodeVersion() {
  if (!stale) return process.versions.node;
  try {
    return execFileSync('node', ['-p', 'process.versions.node'], { encoding: 'utf8' }).trim();
  } catch {
    return process.versions.node; // No `node` on PATH to ask: the one running this is the best guess.
  }
}

const problem = nodeVersionProblem(
  scriptNodeVersion(),
  engines,
  // node_modules/.bin/node is missing or broken (an install with --ignore-scripts or
  // --omit=dev, or a run outside `npm run`): the project's own Node 24 is the fix.
  'run the script with `npm run <script>` after `npm install`, which puts Node 24 into node_modules/.bin (package.json devDependencies `node`), or install Node 22.15 or later (`nvm install 22`, or https://nodejs.org/en/download)',
);
if (problem !== undefined) {
  process.stderr.write(`${problem}\n`);
  process.exit(2);
}
