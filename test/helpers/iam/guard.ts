/**
 * Every AWS call a handler makes, evaluated against the IAM its function's role is granted in
 * the synthesized stack. The guard hooks `send` of the SDK clients the handlers use (on their
 * prototypes: the handlers create some clients where no test can reach them, and
 * aws-sdk-client-mock replaces `send`, so a middleware would never see a mocked service);
 * `as(caller, work)` names the function whose calls `work` makes. A call the role would be
 * denied throws AccessDenied, as AWS would answer, and is kept in `problems()`, so that a handler
 * that swallows the error cannot hide it; so is a call that cannot be mapped to IAM.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { EventBridgeClient } from '@aws-sdk/client-eventbridge';
import { GlueClient } from '@aws-sdk/client-glue';
import { S3Client } from '@aws-sdk/client-s3';
import { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { SQSClient } from '@aws-sdk/client-sqs';
import type { FunctionName } from '../../../infra/constructs/functions.js';
import type { Deployment } from './deployment.js';
import { SECRET_SUFFIX } from './intrinsics.js';
import { evaluate } from './policy.js';
import {
  type DeployedNames,
  type IamAction,
  iamActionsOf,
  type Service,
  UnmappedCallError,
} from './requests.js';

/** Who makes the calls: a function, with the environment its container loaded with. */
export interface Caller {
  readonly fn: FunctionName;
  /** The container's environment (local bucket, prefix, queue URLs, secret id, bus, table). */
  readonly env: Readonly<Record<string, string | undefined>>;
}

/** One authorization the guard evaluated. */
export interface EvaluatedCall {
  readonly fn: FunctionName;
  readonly command: string;
  readonly action: string;
  readonly resource: string;
  readonly allowed: boolean;
  /** The statement that allowed or denied it. */
  readonly by?: string;
}

interface SdkCommand {
  readonly input: unknown;
}
type Send = (this: unknown, command: SdkCommand, ...rest: unknown[]) => unknown;
interface ClientClass {
  readonly name: string;
  readonly prototype: { send: Send };
}

/** The SDK clients the handlers use, by the service they call. */
export const GUARDED_CLIENTS: ReadonlyArray<readonly [ClientClass, Service]> = [
  [S3Client as unknown as ClientClass, 's3'],
  [SQSClient as unknown as ClientClass, 'sqs'],
  [DynamoDBClient as unknown as ClientClass, 'dynamodb'],
  [SecretsManagerClient as unknown as ClientClass, 'secretsmanager'],
  [EventBridgeClient as unknown as ClientClass, 'events'],
  [GlueClient as unknown as ClientClass, 'glue'],
];

/** The variables that name a resource the handlers call (infra/constructs/exporter-function.ts). */
const NAMING_VARIABLES = [
  'DATA_BUCKET',
  'DATA_PREFIX',
  'API_KEY_SECRET_ID',
  'PLAN_QUEUE_URL',
  'REPORT_QUEUE_URL',
  'EVENT_BUS_NAME',
  'REQUEST_BUDGET_TABLE',
  'GLUE_DATABASE',
] as const;
type NamingVariable = (typeof NAMING_VARIABLES)[number];

/** An error as AWS answers a denied call (status 403), naming the action and the ARN. */
export class AccessDeniedError extends Error {
  readonly $fault = 'client';
  readonly $metadata = { httpStatusCode: 403 };
  readonly Code = 'AccessDenied';
  constructor(message: string) {
    super(message);
    this.name = 'AccessDenied';
  }
}

export class IamGuard {
  readonly deployment: Deployment;
  /** Every authorization evaluated, in order. */
  readonly calls: EvaluatedCall[] = [];
  readonly #problems: string[] = [];
  readonly #caller = new AsyncLocalStorage<Caller>();
  readonly #installed: { cls: ClientClass; inner: Send; hooked: Send; hadOwn: boolean }[] = [];
  /** What each naming variable is in the deployment (one value for every function that has it). */
  readonly #deployed: Partial<Record<NamingVariable, string>> = {};

  constructor(deployment: Deployment) {
    this.deployment = deployment;
    for (const fn of Object.values(deployment.functions)) {
      for (const name of NAMING_VARIABLES) {
        const value = fn.environment[name];
        if (value === undefined) continue;
        if (this.#deployed[name] !== undefined && this.#deployed[name] !== value)
          throw new Error(`${name} differs between the functions: ${this.#deployed[name]} and ${value}`);
        this.#deployed[name] = value;
      }
    }
  }

  /** Runs `work` as `caller`: its AWS calls are evaluated against that function's role. */
  as<T>(caller: Caller, work: () => T): T {
    return this.#caller.run(caller, work);
  }

  /** Hooks `send` of each client class (after aws-sdk-client-mock's stubs, if any: in front of them). */
  install(clients: ReadonlyArray<readonly [ClientClass, Service]> = GUARDED_CLIENTS): void {
    for (const [cls, service] of clients) {
      const proto = cls.prototype;
      const hadOwn = Object.hasOwn(proto, 'send');
      const inner = proto.send;
      const guard = this;
      const hooked: Send = function (this: unknown, command, ...rest) {
        return guard.#send(service, command, () => inner.call(this, command, ...rest));
      };
      proto.send = hooked;
      this.#installed.push({ cls, inner, hooked, hadOwn });
    }
  }

  /** Takes the hooks off (a hook a mock has since replaced is left to the mock's restore). */
  uninstall(): void {
    for (const { cls, inner, hooked, hadOwn } of this.#installed.splice(0).reverse()) {
      if (cls.prototype.send !== hooked) continue;
      if (hadOwn) cls.prototype.send = inner;
      else delete (cls.prototype as { send?: Send }).send;
    }
  }

  /** Throws if a mock replaced a hook since `install` (its calls would go unevaluated). */
  assertInstalled(): void {
    const lost = this.#installed
      .filter(({ cls, hooked }) => cls.prototype.send !== hooked)
      .map((i) => i.cls.name);
    if (lost.length > 0)
      throw new Error(`the IAM guard was replaced on ${lost.join(', ')} (a mock made after install?)`);
  }

  /** Denied and unmapped calls since the last `clear()`, each once. */
  problems(): string[] {
    return [...new Set(this.#problems)];
  }

  clear(): void {
    this.#problems.length = 0;
  }

  /** Whether `fn` made an allowed call of `action` on a resource matching `resource`. */
  made(fn: FunctionName, action: string, resource: RegExp | string = /.*/): boolean {
    return this.calls.some(
      (c) =>
        c.fn === fn &&
        c.action === action &&
        c.allowed &&
        (typeof resource === 'string' ? c.resource === resource : resource.test(c.resource)),
    );
  }

  #send(service: Service, command: SdkCommand, call: () => unknown): unknown {
    const caller = this.#caller.getStore();
    // The test's own calls (setup, assertions) run under no function's role.
    if (caller === undefined) return call();
    const name = (command as { constructor: { name: string } }).constructor.name;
    const input = (command.input ?? {}) as Record<string, unknown>;
    let actions: IamAction[];
    try {
      actions = iamActionsOf(service, name, input, this.#names(caller.env));
    } catch (error) {
      if (!(error instanceof UnmappedCallError)) throw error;
      const problem = `${caller.fn}: ${service} ${name}: ${error.message}`;
      this.#problems.push(problem);
      return Promise.reject(new AccessDeniedError(`not evaluated: ${problem}`));
    }
    for (const action of actions) {
      const denied = this.#authorize(caller.fn, name, action);
      if (denied !== undefined) return Promise.reject(new AccessDeniedError(denied));
    }
    const answer = call();
    if (service !== 's3' || (name !== 'GetObjectCommand' && name !== 'HeadObjectCommand')) return answer;
    // S3 answers a missing key with 404 only to a caller allowed to list the bucket; else 403.
    return (answer as Promise<unknown>).catch((error: unknown) => {
      const status = (error as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode;
      if (status !== 404) throw error;
      const bucket = `arn:${this.deployment.target.partition}:s3:::${this.#names(caller.env).bucket(String(input.Bucket))}`;
      const list = {
        action: 's3:ListBucket',
        resource: bucket,
        context: { 'aws:SecureTransport': 'true', 's3:TlsVersion': '1.3' },
      };
      const denied = this.#authorize(caller.fn, `${name} (404)`, list);
      throw denied === undefined ? error : new AccessDeniedError(denied);
    });
  }

  /** Evaluates one authorization; returns the denial's message, if denied. */
  #authorize(
    fn: FunctionName,
    command: string,
    { action, resource, context }: IamAction,
  ): string | undefined {
    const role = this.deployment.functions[fn];
    const bucket = /^arn:[^:]+:s3:::([^/]+)/.exec(resource)?.[1];
    const decision = evaluate(
      { principal: role.roleArn, action, resource, context },
      {
        identity: role.policies,
        resource: bucket === undefined ? [] : this.deployment.bucketPolicies(bucket),
      },
    );
    const allowed = decision.decision === 'allow';
    this.calls.push({ fn, command, action, resource, allowed, ...(decision.by && { by: decision.by }) });
    if (allowed) return undefined;
    const problem = `${fn} may not ${action} on ${resource} (${command}: ${decision.decision}${decision.by ? ` by ${decision.by}` : ''})`;
    this.#problems.push(problem);
    return problem;
  }

  #names(local: Caller['env']): DeployedNames {
    const deployed = this.#deployed;
    const { partition, region, account } = this.deployment.target;
    const need = (name: NamingVariable, what: string): string => {
      const value = deployed[name];
      if (value === undefined) throw new UnmappedCallError(`${what}: the stack sets no ${name}`);
      return value;
    };
    const same = (name: NamingVariable, value: string | undefined, what: string): string => {
      if (value === undefined || local[name] !== value)
        throw new UnmappedCallError(`${what} ${value} is not the container's ${name} (${local[name]})`);
      return need(name, what);
    };
    const queueArn = (url: string) => {
      const [, host, owner, queue] = /^https:\/\/sqs\.([^.]+)\.[^/]+\/(\d{12})\/([^/?]+)$/.exec(url) ?? [];
      if (queue === undefined) throw new UnmappedCallError(`not a queue URL: ${url}`);
      return `arn:${partition}:sqs:${host}:${owner}:${queue}`;
    };
    return {
      partition,
      bucket: (b) => same('DATA_BUCKET', b, 'bucket'),
      key: (key) => {
        const prefix = local.DATA_PREFIX ?? '';
        if (!key.startsWith(prefix))
          throw new UnmappedCallError(`key ${key} is outside the data prefix ${prefix}`);
        return `${deployed.DATA_PREFIX ?? ''}${key.slice(prefix.length)}`;
      },
      queueArn: (url) => {
        const variable = (['PLAN_QUEUE_URL', 'REPORT_QUEUE_URL'] as const).find((v) => local[v] === url);
        if (variable === undefined)
          throw new UnmappedCallError(`queue ${url} is none of the container's queues`);
        return queueArn(need(variable, 'queue'));
      },
      tableArn: (table) =>
        `arn:${partition}:dynamodb:${region}:${account}:table/${same('REQUEST_BUDGET_TABLE', table, 'table')}`,
      secretArn: (id) => {
        const secret = same('API_KEY_SECRET_ID', id, 'secret');
        if (/^arn:[^:]+:secretsmanager:[^:]+:\d{12}:secret:.+-[A-Za-z0-9]{6}$/.test(secret)) return secret;
        // A name or a partial ARN: the secret's real ARN carries Secrets Manager's random suffix.
        const arn = secret.startsWith('arn:')
          ? secret
          : `arn:${partition}:secretsmanager:${region}:${account}:secret:${secret}`;
        return `${arn}-${SECRET_SUFFIX}`;
      },
      glueTableArns: (database, table, catalogId) => {
        if (catalogId !== undefined && catalogId !== account)
          throw new UnmappedCallError(`Glue catalog ${catalogId} is not the deployment's account`);
        const db = same('GLUE_DATABASE', database, 'Glue database');
        const arn = (resource: string) => `arn:${partition}:glue:${region}:${account}:${resource}`;
        return [arn('catalog'), arn(`database/${db}`), arn(`table/${db}/${table}`)];
      },
      busArn: (bus) => {
        const name = same('EVENT_BUS_NAME', bus ?? 'default', 'event bus');
        return name.startsWith('arn:')
          ? name
          : `arn:${partition}:events:${region}:${account}:event-bus/${name}`;
      },
    };
  }
}
