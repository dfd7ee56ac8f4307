/**
 * Builders for the infra tests: the app as `infra/app.ts` builds it, with cdk.json's context
 * plus overrides, and template lookups shared by the test files.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { App } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { openLakeSql } from '../../functions/cli/sql.js';
import { parseConfig } from '../../infra/config.js';
import { FUNCTION_NAMES, FUNCTION_SETTINGS, type FunctionName } from '../../infra/constructs/functions.js';
import { addExporterStack, type ExporterStack } from '../../infra/exporter-stack.js';
import { readConfig } from '../../infra/settings.js';
import {
  DT_PROJECTION_FORMAT,
  partitionTemplate,
  STATE_KEYS,
  STATE_ROOT,
  type TableFormat,
} from '../../shared/layout.js';

const CDK_JSON = new URL('../../cdk.json', import.meta.url);

/** The base URL the test stacks call: cdk.json ships none, and the docs' example fails synth. */
export const TEST_API_BASE_URL = 'https://api.acme.test';

/** The context cdk.json gives `cdk synth`. */
export function cdkJsonContext(): Record<string, unknown> {
  const json = JSON.parse(readFileSync(CDK_JSON, 'utf8')) as { context?: Record<string, unknown> };
  return json.context ?? {};
}

export interface Synthesized {
  readonly app: App;
  readonly stack: ExporterStack;
  readonly template: Template;
  /** The cloud assembly directory (bundled assets live there). */
  readonly outdir: string;
}

/**
 * Builds and synthesizes the app like `infra/app.ts` (cdk-nag registered: an unacknowledged
 * finding throws). `bundle: false` skips esbuild (CDK's `aws:cdk:bundling-stacks` = []) for
 * tests that look at anything but the code; one test file bundles for real and checks the code.
 */
const outdirs: string[] = [];

/** Removes the cloud assemblies this test file synthesized (call in afterAll). */
export function removeSynthOutputs(): void {
  for (const dir of outdirs.splice(0)) rmSync(dir, { recursive: true, force: true });
}

/** An app like `infra/app.ts` builds, with cdk.json's context plus `context`, not yet synthesized. */
export function testApp(context: Record<string, unknown> = {}, options: { bundle?: boolean } = {}): App {
  const outdir = mkdtempSync(join(tmpdir(), 'cre-cdk-'));
  outdirs.push(outdir);
  return new App({
    outdir,
    context: {
      apiBaseUrl: TEST_API_BASE_URL,
      ...cdkJsonContext(),
      'aws:cdk:enable-asset-metadata': true,
      ...(options.bundle === true ? {} : { 'aws:cdk:bundling-stacks': [] }),
      ...context,
    },
  });
}

export function synthExporter(
  context: Record<string, unknown> = {},
  options: { bundle?: boolean } = {},
): Synthesized {
  const app = testApp(context, options);
  // The fresh outdir as root: no settings file of this checkout (deploy/prod.json) is read.
  const stack = addExporterStack(app, readConfig(app, { root: app.outdir }));
  app.synth();
  return { app, stack, template: Template.fromStack(stack), outdir: app.outdir };
}

/** One app holding a stack per stage (cdk.json's context plus `context`), synthesized. */
export function synthStages(
  stages: readonly string[],
  context: Record<string, unknown> = {},
): { app: App; stacks: ExporterStack[]; templates: Template[] } {
  const app = testApp(context);
  const base = { apiBaseUrl: TEST_API_BASE_URL, ...cdkJsonContext(), ...context };
  const stacks = stages.map((stage) => addExporterStack(app, parseConfig({ ...base, stage })));
  app.synth();
  return { app, stacks, templates: stacks.map((s) => Template.fromStack(s)) };
}

/** Template resources of one type, by logical id. */
export type Resources = Record<
  string,
  { Type: string; Properties: Record<string, unknown>; Metadata?: Record<string, unknown> }
>;

export function resourcesOf(template: Template, type: string): Resources {
  return template.findResources(type) as Resources;
}

/** The single resource of a type whose logical id starts with a construct path prefix (ids drop slashes). */
export function logicalIdOf(template: Template, type: string, idPrefix: string): string {
  const ids = Object.keys(resourcesOf(template, type)).filter((id) => id.startsWith(idPrefix));
  if (ids.length !== 1)
    throw new Error(`expected one ${type} with id ${idPrefix}*, found ${ids.join(', ') || 'none'}`);
  return ids[0]!;
}

/** Logical ids a CloudFormation value refers to (Ref and Fn::GetAtt), anywhere inside it. */
export function referencedIds(value: unknown): Set<string> {
  const ids = new Set<string>();
  const walk = (v: unknown): void => {
    if (Array.isArray(v)) {
      for (const x of v) walk(x);
    } else if (v !== null && typeof v === 'object') {
      const o = v as Record<string, unknown>;
      if (typeof o.Ref === 'string') ids.add(o.Ref);
      const getAtt = o['Fn::GetAtt'];
      if (Array.isArray(getAtt) && typeof getAtt[0] === 'string') ids.add(getAtt[0]);
      for (const x of Object.values(o)) walk(x);
    }
  };
  walk(value);
  return ids;
}

export interface Statement {
  Effect: string;
  Action: string | string[];
  Resource: unknown;
  Condition?: unknown;
}

/** Every Allow statement of the stack's IAM policies, with the roles the policy is attached to. */
export function allowStatements(template: Template): { roles: Set<string>; statement: Statement }[] {
  const out: { roles: Set<string>; statement: Statement }[] = [];
  for (const policy of Object.values(resourcesOf(template, 'AWS::IAM::Policy'))) {
    const doc = policy.Properties.PolicyDocument as { Statement: Statement[] };
    const roles = referencedIds(policy.Properties.Roles);
    for (const statement of doc.Statement) if (statement.Effect === 'Allow') out.push({ roles, statement });
  }
  return out;
}

export const actionsOf = (s: Statement): string[] => (Array.isArray(s.Action) ? s.Action : [s.Action]);

export type FunctionIds = Record<FunctionName, string>;

/** Logical ids of the four functions. */
export function functionIds(template: Template): FunctionIds {
  return Object.fromEntries(
    FUNCTION_NAMES.map((n) => [
      n,
      logicalIdOf(template, 'AWS::Lambda::Function', `Functions${FUNCTION_SETTINGS[n].id}`),
    ]),
  ) as FunctionIds;
}

/** The `s3://<data bucket>/<key>` the template builds for a key of the data lake. */
export const dataLakeUrl = (bucketId: string, key: string) => ({
  'Fn::Join': ['', ['s3://', { Ref: bucketId }, `/${key}`]],
});

/** The Glue table parameters of a table over `prefix`: its classification and `dt` partition projection. */
export const projectedTableParameters = (bucketId: string, prefix: string, classification: string) => ({
  classification,
  EXTERNAL: 'TRUE',
  'projection.enabled': 'true',
  'projection.dt.type': 'date',
  'projection.dt.format': DT_PROJECTION_FORMAT,
  'projection.dt.range': '2025-01-01,NOW',
  'projection.dt.interval': '1',
  'projection.dt.interval.unit': 'DAYS',
  'storage.location.template': dataLakeUrl(bucketId, partitionTemplate(prefix)),
});

/** Each table and view by name, its column names in order (a Glue table's partition keys last). */
export type SqlSurface = Record<string, string[]>;

/** The tables and views a template's Glue catalog registers, as Athena lists them. */
export function glueSurface(template: Template): SqlSurface {
  const surface: SqlSurface = {};
  for (const r of Object.values(resourcesOf(template, 'AWS::Glue::Table'))) {
    const input = r.Properties.TableInput as {
      Name: string;
      PartitionKeys?: { Name: string }[];
      StorageDescriptor: { Columns: { Name: string }[] };
    };
    surface[input.Name] = [...input.StorageDescriptor.Columns, ...(input.PartitionKeys ?? [])].map(
      (c) => c.Name,
    );
  }
  return surface;
}

/**
 * What the `sql` command offers over an output of `format` that no run has written yet (every
 * table and view is there, empty): the same shape as {@link glueSurface}.
 */
export async function localSqlSurface(format: TableFormat): Promise<SqlSurface> {
  const root = mkdtempSync(join(tmpdir(), 'cre-sql-surface-'));
  try {
    // The format as a run records it: an output holds Hive tables until one says otherwise.
    mkdirSync(join(root, STATE_ROOT), { recursive: true });
    writeFileSync(
      join(root, STATE_KEYS.tableFormat),
      `${JSON.stringify({ table_format: format, run_id: 'surface' })}\n`,
    );
    const sql = await openLakeSql(root);
    try {
      const { rows } = await sql.query(
        "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = 'main' ORDER BY table_name, ordinal_position",
      );
      const surface: SqlSurface = {};
      for (const [table, column] of rows as [string, string][])
        surface[table] = [...(surface[table] ?? []), column];
      return surface;
    } finally {
      sql.close();
    }
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}
