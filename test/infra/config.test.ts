/** Configuration from CDK context: defaults, `-c` strings, and errors that name the key. */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { App, Stack } from 'aws-cdk-lib';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { CONTEXT_KEYS, EXAMPLE_API_BASE_URL, InfraConfigError, parseConfig } from '../../infra/config.js';
import { CampaignReportExporter } from '../../infra/exporter.js';
import { readConfig } from '../../infra/settings.js';
import { DEFAULT_SCHEMA_CONTRACT } from '../../shared/export/tables.js';
import { RUN_DEFAULTS, type RunDefault } from '../../shared/run-defaults.js';
import { codeBlocks, readMarkdown } from '../helpers/markdown.js';
import { cdkJsonContext } from './helpers.js';

const BASE = { apiBaseUrl: 'https://api.acme.test' };
const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** The message parseConfig throws for these values. */
const errorOf = (raw: Record<string, unknown>): string => {
  try {
    parseConfig(raw);
  } catch (error) {
    expect(error).toBeInstanceOf(InfraConfigError);
    return (error as Error).message;
  }
  throw new Error(`accepted ${JSON.stringify(raw)}`);
};

describe('parseConfig', () => {
  it('applies the documented defaults', () => {
    expect(parseConfig(BASE)).toEqual({
      stage: 'prod',
      apiBaseUrl: 'https://api.acme.test',
      scheduleCron: '0 2 * * ? *',
      scheduleTimeZone: 'UTC',
      fixedEgressIp: false,
      reportBatchSize: 2,
      reportMaxConcurrency: 2,
      planMaxConcurrency: 2,
      unitSize: 100,
      reportConcurrency: 128,
      rateCeiling: 20,
      secretCacheTtlSeconds: 300,
      maxBodyMiB: 64,
      runDeadlineMinutes: 360,
      rawTransitionDays: 90,
      rawStorageClass: 'GLACIER_IR',
      athenaResultsRetentionDays: 7,
      quarantineRetentionDays: 90,
      logRetentionDays: 90,
      logLevel: 'INFO',
      bytesScannedCutoffMb: 10_240,
      maxReceiveCount: 5,
      // Today's sizes (infra/function-sizes.ts): memory in MB, timeouts in seconds.
      startRunMemoryMb: 512,
      planCampaignMemoryMb: 512,
      planCampaignTimeoutSeconds: 300,
      exportReportsMemoryMb: 768,
      exportReportsTimeoutSeconds: 300,
      finishRunMemoryMb: 1024,
      finishRunTimeoutSeconds: 900,
      projectionStartDate: '2025-01-01',
      dataPrefix: '',
      throttleShareThreshold: 0.05,
      missedRunAlarmHours: 26,
      tableFormat: 'hive',
      schemaContract: 'evolve',
    });
  });

  it('takes schemaContract evolve or freeze, any case, evolve when unset, and names the key for anything else', () => {
    expect(parseConfig(BASE).schemaContract).toBe(DEFAULT_SCHEMA_CONTRACT);
    expect(parseConfig({ ...BASE, schemaContract: '' }).schemaContract).toBe('evolve');
    expect(parseConfig({ ...BASE, schemaContract: ' Freeze ' }).schemaContract).toBe('freeze');
    expect(parseConfig({ ...BASE, schemaContract: 'evolve' }).schemaContract).toBe('evolve');
    expect(() => parseConfig({ ...BASE, schemaContract: 'strict' })).toThrow(
      /context "schemaContract": expected one of evolve, freeze \(got "strict"\)/,
    );
  });

  it('takes tableFormat hive or iceberg, any case, and names the key for anything else', () => {
    expect(parseConfig({ ...BASE, tableFormat: ' Iceberg ' }).tableFormat).toBe('iceberg');
    expect(() => parseConfig({ ...BASE, tableFormat: 'delta' })).toThrow(
      /context "tableFormat": expected one of hive, iceberg/,
    );
  });

  it('takes the default and range of every run default with a context key from shared/run-defaults.ts', () => {
    const defaults = parseConfig(BASE) as unknown as Record<string, unknown>;
    const withContext = Object.values(RUN_DEFAULTS as Readonly<Record<string, RunDefault>>).filter(
      (entry) => entry.context !== undefined,
    );
    expect(withContext.map((entry) => entry.context).sort()).toEqual(
      [
        'maxBodyMiB',
        'maxReceiveCount',
        'rateCeiling',
        'reportConcurrency',
        'runDeadlineMinutes',
        'secretCacheTtlSeconds',
        'unitSize',
      ].sort(),
    );
    for (const entry of withContext) {
      const key = entry.context!;
      expect(defaults[key], key).toBe(entry.value);
      expect((parseConfig({ ...BASE, [key]: entry.min }) as unknown as Record<string, unknown>)[key]).toBe(
        entry.min,
      );
      expect(
        (parseConfig({ ...BASE, [key]: String(entry.max) }) as unknown as Record<string, unknown>)[key],
      ).toBe(entry.max);
      for (const outside of [entry.min - 1, entry.max + 1]) {
        const message = errorOf({ ...BASE, [key]: outside });
        expect(message).toContain(`context "${key}"`);
        expect(message).toContain(`from ${entry.min} to ${entry.max} (default ${entry.value})`);
      }
    }
  });

  it('accepts the strings `cdk -c key=value` passes', () => {
    const c = parseConfig({
      ...BASE,
      fixedEgressIp: 'true',
      reportBatchSize: '7',
      throttleShareThreshold: '0.05',
      logLevel: 'warn',
      logRetentionDays: '365',
      scheduleCron: 'cron(0 6 ? * MON-FRI *)',
      fullRefreshCron: ' 0  3  1  *  ?  * ',
      dataPrefix: 'a/b',
    });
    expect(c).toMatchObject({
      fixedEgressIp: true,
      reportBatchSize: 7,
      throttleShareThreshold: 0.05,
      logLevel: 'WARN',
      logRetentionDays: 365,
      scheduleCron: '0 6 ? * MON-FRI *',
      fullRefreshCron: '0 3 1 * ? *',
      dataPrefix: 'a/b/',
    });
  });

  it('treats empty strings as unset', () => {
    const c = parseConfig({ ...BASE, alarmEmail: '', fullRefreshCron: '', reportBatchSize: '' });
    expect(c.alarmEmail).toBeUndefined();
    expect(c.fullRefreshCron).toBeUndefined();
    expect(c.reportBatchSize).toBe(2);
  });

  it('strips a trailing slash from the base URL', () => {
    expect(parseConfig({ apiBaseUrl: 'https://api.acme.test/v/' }).apiBaseUrl).toBe(
      'https://api.acme.test/v',
    );
  });

  it.each([
    [{}, 'apiBaseUrl', /required/],
    [{ apiBaseUrl: 'http://api.acme.test' }, 'apiBaseUrl', /https/],
    [{ apiBaseUrl: 'not a url' }, 'apiBaseUrl', /https/],
    [{ ...BASE, scheduleCron: '0 2 * * *' }, 'scheduleCron', /6 fields/],
    [{ ...BASE, scheduleCron: '0 2 * * MON *' }, 'scheduleCron', /"\?"/],
    [{ ...BASE, fullRefreshCron: 'weekly' }, 'fullRefreshCron', /6 fields/],
    [{ ...BASE, scheduleTimeZone: 'Mars/Olympus' }, 'scheduleTimeZone', /IANA/],
    [{ ...BASE, alarmEmail: 'ops' }, 'alarmEmail', /e-mail/],
    [{ ...BASE, fixedEgressIp: 'yes' }, 'fixedEgressIp', /true or false/],
    [{ ...BASE, reportBatchSize: 11 }, 'reportBatchSize', /integer from 1 to 10/],
    [{ ...BASE, reportBatchSize: '2.5' }, 'reportBatchSize', /integer/],
    [{ ...BASE, reportMaxConcurrency: 1 }, 'reportMaxConcurrency', /from 2 to 1000/],
    [{ ...BASE, unitSize: 0 }, 'unitSize', /integer/],
    [{ ...BASE, rawRetentionDays: -1 }, 'rawRetentionDays', /integer/],
    [{ ...BASE, rawStorageClass: 'GLACIER' }, 'rawStorageClass', /one of GLACIER_IR, STANDARD_IA/],
    [
      { ...BASE, rawStorageClass: 'standard_ia', rawTransitionDays: '29' },
      'rawTransitionDays',
      /STANDARD_IA after 30 days at the earliest: give at least 30/,
    ],
    [
      { ...BASE, rawRetentionDays: 90 },
      'rawRetentionDays',
      /expires raw\/ before it moves to GLACIER_IR after "rawTransitionDays" 90/,
    ],
    [{ ...BASE, athenaResultsRetentionDays: 'soon' }, 'athenaResultsRetentionDays', /integer/],
    [{ ...BASE, logRetentionDays: 31 }, 'logRetentionDays', /one of 1, 3, 5/],
    [{ ...BASE, logLevel: 'LOUD' }, 'logLevel', /DEBUG, INFO, WARN, ERROR/],
    [{ ...BASE, bytesScannedCutoffMb: 9 }, 'bytesScannedCutoffMb', /integer from 10/],
    [{ ...BASE, maxReceiveCount: 0 }, 'maxReceiveCount', /integer/],
    [{ ...BASE, projectionStartDate: '2025-02-30' }, 'projectionStartDate', /calendar date/],
    [{ ...BASE, projectionStartDate: '1/2/2025' }, 'projectionStartDate', /YYYY-MM-DD/],
    [{ ...BASE, dataPrefix: '/abs' }, 'dataPrefix', /path segments/],
    [{ ...BASE, dataPrefix: 'a/../b' }, 'dataPrefix', /"\.\."/],
    [{ ...BASE, databaseName: 'Acme-Reports' }, 'databaseName', /lowercase/],
    [{ ...BASE, stage: 'Staging' }, 'stage', /lowercase letters/],
    [{ ...BASE, stage: '1st' }, 'stage', /starting with a letter/],
    [{ ...BASE, stage: 'a'.repeat(21) }, 'stage', /at most 20/],
    [{ ...BASE, fixedEgressIp: true, egressEipAllocationId: 'eip-1' }, 'egressEipAllocationId', /eipalloc-/],
    [{ ...BASE, egressEipAllocationId: 'eipalloc-0abc' }, 'egressEipAllocationId', /fixedEgressIp=true/],
    [
      { ...BASE, existingSecretName: 'k', existingSecretKmsKeyArn: 'alias/acme' },
      'existingSecretKmsKeyArn',
      /KMS key ARN/,
    ],
    [
      { ...BASE, existingSecretKmsKeyArn: 'arn:aws:kms:eu-west-1:123456789012:key/1234abcd-12ab' },
      'existingSecretKmsKeyArn',
      /imported secret/,
    ],
    [{ ...BASE, throttleShareThreshold: 1 }, 'throttleShareThreshold', /less than 1/],
    [{ ...BASE, missedRunAlarmHours: 200 }, 'missedRunAlarmHours', /integer/],
    [{ ...BASE, existingSecretArn: 'acme/key' }, 'existingSecretArn', /secret ARN/],
    [{ ...BASE, existingSecretName: 'a b' }, 'existingSecretName', /secret name/],
    [
      {
        ...BASE,
        existingSecretName: 'k',
        existingSecretArn: 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:k',
      },
      'existingSecretArn',
      /not both/,
    ],
  ])('rejects %j naming context "%s"', (raw, key, detail) => {
    const message = errorOf(raw);
    expect(message).toContain(`context "${key}"`);
    expect(message).toMatch(detail);
  });

  it('accepts a stage, an Elastic IP allocation and the key of an imported secret', () => {
    const c = parseConfig({
      ...BASE,
      stage: 'staging-2',
      fixedEgressIp: 'true',
      egressEipAllocationId: 'eipalloc-0123456789abcdef0',
      existingSecretArn: 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:acme/key',
      existingSecretKmsKeyArn: 'arn:aws:kms:eu-west-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab',
    });
    expect(c).toMatchObject({
      stage: 'staging-2',
      egressEipAllocationId: 'eipalloc-0123456789abcdef0',
      existingSecretKmsKeyArn: 'arn:aws:kms:eu-west-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab',
    });
  });

  it('names props, not context, for the construct', () => {
    expect(() => parseConfig({ ...BASE, unitSize: 0 }, 'props')).toThrow(
      /props of CampaignReportExporter:\n {2}prop "unitSize"/,
    );
  });

  it('lists every bad key at once, with the value given', () => {
    const message = errorOf({ ...BASE, unitSize: 'many', logLevel: 'x' });
    expect(message).toContain('context "unitSize"');
    expect(message).toContain('(got "many")');
    expect(message).toContain('context "logLevel"');
  });
});

describe('readConfig', () => {
  it('reads every key from the app context', () => {
    const app = new App({ context: { ...BASE, unitSize: '25', alarmEmail: 'ops@acme.test' } });
    expect(readConfig(app)).toMatchObject({
      unitSize: 25,
      alarmEmail: 'ops@acme.test',
      apiBaseUrl: BASE.apiBaseUrl,
    });
  });

  it('CONTEXT_KEYS holds every configuration key', () => {
    expect([...CONTEXT_KEYS].sort()).toEqual(
      [
        ...Object.keys(parseConfig(BASE)),
        'fullRefreshCron',
        'existingSecretName',
        'existingSecretArn',
        'existingSecretKmsKeyArn',
        'egressEipAllocationId',
        'databaseName',
        'alarmEmail',
        'rawRetentionDays',
        'reportFetchers',
      ].sort(),
    );
  });

  it('every key is a row of the context table of docs/deploy.md', () => {
    const page = readFileSync(new URL('../../docs/deploy.md', import.meta.url), 'utf8');
    const rows = page.split('\n').filter((line) => line.startsWith('| `'));
    const documented = new Set(
      rows.flatMap((row) => [...row.split('|')[1]!.matchAll(/`(\w+)`/g)].map((m) => m[1]!)),
    );
    expect(CONTEXT_KEYS.filter((key) => !documented.has(key))).toEqual([]);
  });

  it('refuses a stack without its own base URL, naming where it goes', () => {
    expect(cdkJsonContext().apiBaseUrl).toBeUndefined();
    const root = mkdtempSync(join(tmpdir(), 'cre-settings-'));
    expect(() => readConfig(new App({ context: cdkJsonContext() }), { root })).toThrow(
      new InfraConfigError(
        'no apiBaseUrl: put your Integration API {base_url} in deploy/prod.json (or cdk.json "context"), e.g. "apiBaseUrl": "https://api.acme.com"',
      ),
    );
    for (const url of [EXAMPLE_API_BASE_URL, `${EXAMPLE_API_BASE_URL}/`]) {
      expect(() => readConfig(new App({ context: { apiBaseUrl: url, stage: 'staging' } }), { root })).toThrow(
        `apiBaseUrl is the docs' example ${EXAMPLE_API_BASE_URL}: put your Integration API {base_url} in deploy/staging.json (or cdk.json "context")`,
      );
    }
  });

  it('refuses the example base URL as a prop of the construct', () => {
    const stack = new Stack(new App(), 'Other');
    expect(() => new CampaignReportExporter(stack, 'Reports', { apiBaseUrl: EXAMPLE_API_BASE_URL })).toThrow(
      `apiBaseUrl is the docs' example ${EXAMPLE_API_BASE_URL}: put your Integration API {base_url} in the prop apiBaseUrl`,
    );
  });
});

describe('the settings file deploy/<stage>.json', () => {
  let root: string;
  const write = (stage: string, text: string) => {
    mkdirSync(join(root, 'deploy'), { recursive: true });
    writeFileSync(join(root, 'deploy', `${stage}.json`), text);
  };
  const read = (context: Record<string, unknown> = {}) => readConfig(new App({ context }), { root });
  beforeEach(() => {
    root = mkdtempSync(join(tmpdir(), 'cre-settings-'));
  });
  afterEach(() => rmSync(root, { recursive: true, force: true }));

  it('is read for its stage, and a context value wins over it', () => {
    write(
      'prod',
      JSON.stringify({ apiBaseUrl: 'https://api.acme.test', alarmEmail: 'ops@acme.test', unitSize: 50 }),
    );
    write('staging', JSON.stringify({ apiBaseUrl: 'https://staging.acme.test' }));

    expect(read()).toMatchObject({
      apiBaseUrl: 'https://api.acme.test',
      alarmEmail: 'ops@acme.test',
      unitSize: 50,
    });
    expect(read({ unitSize: '20' })).toMatchObject({ alarmEmail: 'ops@acme.test', unitSize: 20 });
    const staging = read({ stage: 'staging' });
    expect(staging).toMatchObject({ stage: 'staging', apiBaseUrl: 'https://staging.acme.test' });
    expect(staging.alarmEmail).toBeUndefined();
  });

  it("reads each settings file docs/deploy.md shows (its json blocks) as the stack's settings", () => {
    const page = readMarkdown(fileURLToPath(new URL('../../docs/deploy.md', import.meta.url)), ROOT);
    const examples = codeBlocks(page).filter((block) => block.lang === 'json');
    expect(examples.length).toBeGreaterThan(0);
    for (const { value, line } of examples) {
      write('prod', value);
      const config = read();
      for (const [key, setting] of Object.entries(JSON.parse(value) as Record<string, unknown>))
        expect(config, `docs/deploy.md:${line}`).toHaveProperty(key, setting);
    }
  });

  it('warns when a context value overrides the file’s, and not when it repeats it', () => {
    write(
      'prod',
      JSON.stringify({ apiBaseUrl: 'https://api.acme.test', unitSize: 50, alarmEmail: 'ops@acme.test' }),
    );
    const warnings: string[] = [];
    readConfig(new App({ context: { unitSize: '20', alarmEmail: 'ops@acme.test' } }), {
      root,
      warn: (message) => warnings.push(message),
    });
    expect(warnings).toEqual([
      "context unitSize=20 (cdk.json or -c) overrides deploy/prod.json's 50 for this deploy only: a deploy without it goes back to the file's; to keep it, put it in deploy/prod.json",
    ]);
  });

  it('names the file for a bad value read from it, and the context for one given there', () => {
    write('prod', JSON.stringify({ apiBaseUrl: 'https://api.acme.test', unitSize: 'many' }));
    expect(() => read({ logLevel: 'LOUD' })).toThrow(/deploy\/prod\.json "unitSize": expected an integer/);
    expect(() => read({ logLevel: 'LOUD' })).toThrow(/context "logLevel": expected one of/);
  });

  it.each([
    ['{"apiBaseUrl": ', /^deploy\/prod\.json: not JSON \(.*\): fix the file$/],
    ['["https://api.acme.test"]', /^deploy\/prod\.json: expected a JSON object of settings/],
    [
      '{"apiBaseUrl": "https://api.acme.test", "alarmMail": "x"}',
      /^deploy\/prod\.json "alarmMail": not a setting: expected one of apiBaseUrl, /,
    ],
    [
      '{"apiBaseUrl": "https://api.acme.test", "stage": "prod"}',
      /^deploy\/prod\.json "stage": the file's name is its stage: remove the key$/,
    ],
  ])('refuses %s, naming the file', (text, message) => {
    write('prod', text);
    expect(() => read()).toThrow(message);
    expect(() => read()).toThrow(InfraConfigError);
  });
});
