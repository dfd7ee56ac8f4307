/**
 * Where the app's configuration comes from: the stage's settings file `deploy/<stage>.json`
 * (kept in the repository, so a setting given once stays), overlaid by CDK context (`cdk.json`
 * or `-c key=value`); and the checks only a stack needs (its own API base URL).
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Construct } from 'constructs';
import {
  CONTEXT_KEYS,
  EXAMPLE_API_BASE_URL,
  type ExporterConfig,
  ExporterConfigSchema,
  InfraConfigError,
  parseConfig,
} from './config.js';

/** Where the app reads a stage's settings, relative to the directory `cdk` runs in. */
export const SETTINGS_DIR = 'deploy';
/** The settings file of a stage: `deploy/<stage>.json`, a JSON object of context keys. */
export const settingsFileOf = (stage: string): string => `${SETTINGS_DIR}/${stage}.json`;

/**
 * Rejects a stack without its own API base URL: none given, or the docs' example.
 * @param where where the URL goes (the app: its settings file; a construct: its prop).
 * @throws InfraConfigError one line naming the fix.
 */
export function checkApiBaseUrl(apiBaseUrl: unknown, where: string): void {
  if (typeof apiBaseUrl !== 'string' || apiBaseUrl.trim() === '') {
    throw new InfraConfigError(
      `no apiBaseUrl: put your Integration API {base_url} in ${where}, e.g. "apiBaseUrl": "https://api.acme.com"`,
    );
  }
  if (apiBaseUrl === EXAMPLE_API_BASE_URL) {
    throw new InfraConfigError(
      `apiBaseUrl is the docs' example ${EXAMPLE_API_BASE_URL}: put your Integration API {base_url} in ${where}`,
    );
  }
}

/**
 * A stage's settings file as raw values, or `{}` when there is none.
 * @throws InfraConfigError naming the file: not JSON, not an object, an unknown key or `stage`.
 */
export function readSettingsFile(path: string, file: string): Record<string, unknown> {
  if (!existsSync(path)) return {};
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(path, 'utf8'));
  } catch (error) {
    throw new InfraConfigError(`${file}: not JSON (${(error as Error).message}): fix the file`, {
      cause: error,
    });
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
    throw new InfraConfigError(
      `${file}: expected a JSON object of settings, e.g. {"apiBaseUrl": "https://…"}`,
    );
  }
  const settings = parsed as Record<string, unknown>;
  for (const key of Object.keys(settings)) {
    if (key === 'stage') {
      throw new InfraConfigError(`${file} "stage": the file's name is its stage: remove the key`);
    }
    if (!(CONTEXT_KEYS as readonly string[]).includes(key)) {
      throw new InfraConfigError(
        `${file} "${key}": not a setting: expected one of ${CONTEXT_KEYS.filter((k) => k !== 'stage').join(', ')}`,
      );
    }
  }
  return settings;
}

/**
 * Reads the configuration of the app: the stage's settings file (`deploy/<stage>.json` under
 * `root`, the directory `cdk` runs in) overlaid by every key of {@link CONTEXT_KEYS} the
 * context gives (cdk.json or -c), then validates it and checks the base URL. A context value
 * that overrides the file's is reported through `warn` (default: stderr, which `cdk` shows).
 * @throws InfraConfigError naming the key and where it was read.
 */
export function readConfig(
  scope: Construct,
  options: { root?: string; warn?: (message: string) => void } = {},
): ExporterConfig {
  const context: Record<string, unknown> = {};
  for (const key of CONTEXT_KEYS) {
    const value = scope.node.tryGetContext(key);
    if (value !== undefined) context[key] = value;
  }
  // A bad stage names no file: parseConfig reports it.
  const stage = ExporterConfigSchema.shape.stage.safeParse(context.stage);
  const file = stage.success ? settingsFileOf(stage.data) : undefined;
  const settings =
    file === undefined ? {} : readSettingsFile(join(options.root ?? process.cwd(), file), file);
  const fromFile = new Set(Object.keys(settings).filter((key) => context[key] === undefined));
  const raw = { ...settings, ...context };
  const where = `${file ?? 'deploy/<stage>.json'} (or cdk.json "context")`;
  // Before the schema: a missing URL gets one line saying where it goes, not the list of issues.
  checkApiBaseUrl(raw.apiBaseUrl ?? '', where);
  const config = parseConfig(raw, 'context', file === undefined ? undefined : { file, keys: fromFile });
  checkApiBaseUrl(config.apiBaseUrl, where);
  const warn = options.warn ?? ((message: string) => console.warn(message));
  for (const key of Object.keys(settings)) {
    if (context[key] === undefined || String(context[key]).trim() === String(settings[key]).trim()) continue;
    // A one-off -c is how settings silently reverted: say so while it is still this deploy.
    warn(
      `context ${key}=${String(context[key])} (cdk.json or -c) overrides ${file}'s ${JSON.stringify(settings[key])} ` +
        `for this deploy only: a deploy without it goes back to the file's; to keep it, put it in ${file}`,
    );
  }
  return config;
}
