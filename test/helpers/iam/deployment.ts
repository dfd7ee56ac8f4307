/**
 * The stack as deployed, for IAM: each function's execution role with every identity policy
 * attached to it, its environment, and the bucket policies, all resolved to strings for
 * {@link TEST_TARGET}. Read from the synthesized template (the same app `cdk synth` builds).
 */
import { createHash } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FUNCTION_NAMES, FUNCTION_SETTINGS, type FunctionName } from '../../../infra/constructs/functions.js';
import {
  type DeployTarget,
  Resolver,
  TEST_TARGET,
  type TemplateJson,
  type TemplateResource,
  UnsupportedIntrinsicError,
} from './intrinsics.js';
import type { NamedPolicy, PolicyDocument } from './policy.js';

/** One function of the stack: its role's ARN and policies, and its environment. */
export interface DeployedFunction {
  readonly name: FunctionName;
  readonly roleArn: string;
  readonly policies: readonly NamedPolicy[];
  readonly environment: Readonly<Record<string, string>>;
}

/**
 * AWS managed policies a role of this stack may carry, by their known statements: they grant
 * logs and network interfaces, which no SDK call of the handlers needs, so they never decide a
 * data-plane request; they are evaluated all the same. Any other AWS managed policy throws.
 */
const AWS_MANAGED: Readonly<Record<string, PolicyDocument>> = {
  'service-role/AWSLambdaBasicExecutionRole': {
    Statement: [
      {
        Effect: 'Allow',
        Action: ['logs:CreateLogGroup', 'logs:CreateLogStream', 'logs:PutLogEvents'],
        Resource: '*',
      },
    ],
  },
  'service-role/AWSLambdaVPCAccessExecutionRole': {
    Statement: [
      {
        Effect: 'Allow',
        Action: [
          'logs:CreateLogGroup',
          'logs:CreateLogStream',
          'logs:PutLogEvents',
          'ec2:CreateNetworkInterface',
          'ec2:DescribeNetworkInterfaces',
          'ec2:DescribeSubnets',
          'ec2:DeleteNetworkInterface',
          'ec2:AssignPrivateIpAddresses',
          'ec2:UnassignPrivateIpAddresses',
        ],
        Resource: '*',
      },
    ],
  },
};

/** The deployed stack, read from its template. */
export class Deployment {
  readonly target: DeployTarget;
  readonly resolver: Resolver;
  readonly functions: Readonly<Record<FunctionName, DeployedFunction>>;
  readonly #template: TemplateJson;
  readonly #bucketPolicies = new Map<string, readonly NamedPolicy[]>();

  constructor(template: TemplateJson, target: DeployTarget = TEST_TARGET) {
    this.#template = template;
    this.target = target;
    this.resolver = new Resolver(template, target);
    this.functions = Object.fromEntries(FUNCTION_NAMES.map((n) => [n, this.#function(n)])) as Record<
      FunctionName,
      DeployedFunction
    >;
  }

  /** The stack's template with cdk.json's context plus `context` (cached on disk, see {@link synthesizedTemplate}). */
  static async load(context: Record<string, unknown> = {}): Promise<Deployment> {
    return new Deployment(await synthesizedTemplate(context));
  }

  /** The policies of the bucket named `bucket` (resource policies). */
  bucketPolicies(bucket: string): readonly NamedPolicy[] {
    let policies = this.#bucketPolicies.get(bucket);
    if (policies === undefined) {
      policies = this.resourcesOf('AWS::S3::BucketPolicy')
        .filter(([, r]) => this.resolver.string(r.Properties?.Bucket) === bucket)
        .map(([id, r]) => ({ name: id, document: this.#document(r.Properties?.PolicyDocument) }));
      this.#bucketPolicies.set(bucket, policies);
    }
    return policies;
  }

  /** A customer managed policy of the template whose logical id starts with `idPrefix`. */
  managedPolicy(idPrefix: string): { arn: string; policy: NamedPolicy } {
    const found = this.resourcesOf('AWS::IAM::ManagedPolicy').filter(([id]) => id.startsWith(idPrefix));
    if (found.length !== 1)
      throw new Error(`expected one managed policy ${idPrefix}*, found ${found.length}`);
    const [id, r] = found[0]!;
    return {
      arn: String(this.resolver.ref(id)),
      policy: { name: id, document: this.#document(r.Properties?.PolicyDocument) },
    };
  }

  /** Every identity policy attached to a role of the template (see {@link rolePolicies}). */
  rolePolicies(roleId: string): NamedPolicy[] {
    return rolePolicies(this.#template, this.resolver, roleId);
  }

  #function(name: FunctionName): DeployedFunction {
    const prefix = `Functions${FUNCTION_SETTINGS[name].id}`;
    const found = this.resourcesOf('AWS::Lambda::Function').filter(([id]) => id.startsWith(prefix));
    if (found.length !== 1) throw new Error(`expected one function ${prefix}*, found ${found.length}`);
    const props = found[0]![1].Properties ?? {};
    const role = props.Role as { 'Fn::GetAtt'?: [string, string] } | undefined;
    const roleId = role?.['Fn::GetAtt']?.[0];
    if (roleId === undefined) throw new Error(`${name}: its role is not a role of the template`);
    const variables =
      (props.Environment as { Variables?: Record<string, unknown> } | undefined)?.Variables ?? {};
    return {
      name,
      roleArn: this.resolver.getAtt(roleId, 'Arn'),
      policies: this.rolePolicies(roleId),
      environment: Object.fromEntries(
        Object.entries(variables).map(([k, v]) => [k, String(this.resolver.resolve(v))]),
      ),
    };
  }

  /** The template's resources of one type, by logical id. */
  resourcesOf(type: string): [string, TemplateResource][] {
    return resourcesOf(this.#template, type);
  }

  #document(value: unknown): PolicyDocument {
    return policyDocument(this.resolver, value);
  }
}

function resourcesOf(template: TemplateJson, type: string): [string, TemplateResource][] {
  return Object.entries(template.Resources).filter(([, r]) => r.Type === type);
}

function policyDocument(resolver: Resolver, value: unknown): PolicyDocument {
  const document = resolver.resolve(value) as PolicyDocument | undefined;
  if (document?.Statement === undefined) throw new Error(`not a policy document: ${JSON.stringify(value)}`);
  return document;
}

/**
 * Every identity policy attached to a role: AWS::IAM::Policy and AWS::IAM::ManagedPolicy
 * resources listing it in `Roles`, its inline `Policies`, and its `ManagedPolicyArns` (the
 * template's own, or AWS managed ones of {@link AWS_MANAGED}; any other throws). A permissions
 * boundary is not modelled and throws.
 */
export function rolePolicies(template: TemplateJson, resolver: Resolver, roleId: string): NamedPolicy[] {
  const role = template.Resources[roleId];
  if (role?.Type !== 'AWS::IAM::Role') throw new Error(`${roleId} is not a role`);
  const props = role.Properties ?? {};
  if (props.PermissionsBoundary !== undefined)
    throw new UnsupportedIntrinsicError(`${roleId}: permission boundaries are not modelled`);
  const document = (value: unknown) => policyDocument(resolver, value);
  const attached = (r: TemplateResource) =>
    ((r.Properties?.Roles as unknown[] | undefined) ?? []).some(
      (x) => x !== null && typeof x === 'object' && (x as { Ref?: unknown }).Ref === roleId,
    );
  const policies: NamedPolicy[] = [];
  for (const type of ['AWS::IAM::Policy', 'AWS::IAM::ManagedPolicy'])
    for (const [id, r] of resourcesOf(template, type).filter(([, r]) => attached(r)))
      policies.push({ name: id, document: document(r.Properties?.PolicyDocument) });
  for (const inline of (props.Policies as { PolicyName: unknown; PolicyDocument: unknown }[] | undefined) ??
    [])
    policies.push({
      name: `${roleId}/${resolver.string(inline.PolicyName)}`,
      document: document(inline.PolicyDocument),
    });
  const managedIds = new Map(
    resourcesOf(template, 'AWS::IAM::ManagedPolicy').map(([id]) => [String(resolver.ref(id)), id]),
  );
  for (const value of (props.ManagedPolicyArns as unknown[] | undefined) ?? []) {
    const arn = resolver.string(value);
    const ours = managedIds.get(arn);
    if (ours !== undefined) {
      policies.push({ name: ours, document: document(template.Resources[ours]!.Properties?.PolicyDocument) });
      continue;
    }
    const awsManaged = /^arn:[^:]+:iam::aws:policy\/(.+)$/.exec(arn)?.[1];
    const known = awsManaged === undefined ? undefined : AWS_MANAGED[awsManaged];
    if (known === undefined)
      throw new UnsupportedIntrinsicError(`${roleId}: managed policy ${arn} is not modelled`);
    policies.push({ name: awsManaged!, document: known });
  }
  return policies;
}

const ROOT = new URL('../../../', import.meta.url);
/** The base URL of the synthesized stack: cdk.json ships none, and the docs' example fails synth. */
const TEST_API_BASE_URL = 'https://api.acme.test';
/** What the template is made of: a change to any of these synthesizes it again. */
const INPUT_DIRS = ['infra', 'shared'];
const INPUT_FILES = ['cdk.json', 'node_modules/aws-cdk-lib/package.json'];

/**
 * The stack's template as `cdk synth` makes it (cdk.json's context plus `context`, no bundling,
 * no cdk-nag: neither changes a policy), cached in the temporary directory under a hash of the
 * app's sources, so that the test files that need it synthesize once (about 5 s) between changes.
 */
export async function synthesizedTemplate(context: Record<string, unknown> = {}): Promise<TemplateJson> {
  const hash = createHash('sha256').update(JSON.stringify(context));
  for (const file of [...INPUT_DIRS.flatMap((d) => sourcesUnder(d)), ...INPUT_FILES]) {
    hash.update(file);
    hash.update(readFileSync(new URL(file, ROOT)));
  }
  const cached = join(tmpdir(), `cre-iam-template-${hash.digest('hex').slice(0, 32)}.json`);
  try {
    return JSON.parse(readFileSync(cached, 'utf8')) as TemplateJson;
  } catch {
    // Not synthesized yet for these sources.
  }
  const template = await synthesize(context);
  // Two test files may synthesize at once: each writes a file of its own, then renames it.
  const partial = `${cached}.${process.pid}`;
  writeFileSync(partial, JSON.stringify(template));
  renameSync(partial, cached);
  return template;
}

function sourcesUnder(dir: string): string[] {
  return readdirSync(new URL(dir, ROOT), { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile() && e.name.endsWith('.ts'))
    .map((e) => join(e.parentPath.slice(new URL('.', ROOT).pathname.length), e.name))
    .sort();
}

async function synthesize(context: Record<string, unknown>): Promise<TemplateJson> {
  const [{ App }, { ExporterStack }, { readConfig }] = await Promise.all([
    import('aws-cdk-lib'),
    import('../../../infra/exporter-stack.js'),
    import('../../../infra/settings.js'),
  ]);
  const cdkJson = JSON.parse(readFileSync(new URL('cdk.json', ROOT), 'utf8')) as {
    context?: Record<string, unknown>;
  };
  const outdir = mkdtempSync(join(tmpdir(), 'cre-iam-cdk-'));
  try {
    const app = new App({
      outdir,
      // cdk.json ships no base URL (a deployment puts its own in deploy/<stage>.json).
      context: {
        apiBaseUrl: TEST_API_BASE_URL,
        ...cdkJson.context,
        'aws:cdk:bundling-stacks': [],
        ...context,
      },
    });
    // The empty outdir as root: no settings file of this checkout is read.
    const stack = new ExporterStack(app, 'Iam', { config: readConfig(app, { root: outdir }) });
    return app.synth().getStackByName(stack.stackName).template as TemplateJson;
  } finally {
    rmSync(outdir, { recursive: true, force: true });
  }
}
