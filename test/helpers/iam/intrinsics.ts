/**
 * CloudFormation intrinsics resolved to the strings a deployment would have, for one fixed
 * account and region: Ref, Fn::GetAtt, Fn::Join, Fn::Sub, Fn::Select, Fn::Split and the pseudo
 * parameters. Resources without a physical name get a deterministic one, as CloudFormation would
 * generate. A function, resource type or attribute it does not model throws.
 */

/** A synthesized template (the parts read here). */
export interface TemplateJson {
  readonly Resources: Readonly<Record<string, TemplateResource>>;
  readonly Parameters?: Readonly<Record<string, { readonly Default?: unknown }>>;
}

export interface TemplateResource {
  readonly Type: string;
  readonly Properties?: Readonly<Record<string, unknown>>;
}

/** Where the stack is deployed. */
export interface DeployTarget {
  readonly account: string;
  readonly region: string;
  readonly partition: string;
  readonly stackName: string;
}

/** The target of the tests: one account, one region. */
export const TEST_TARGET: DeployTarget = {
  account: '123456789012',
  region: 'eu-west-1',
  partition: 'aws',
  stackName: 'CampaignReportExporter',
};

/** The random suffix Secrets Manager appends to a secret's name in its ARN. */
export const SECRET_SUFFIX = 'AbC123';

export class UnsupportedIntrinsicError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UnsupportedIntrinsicError';
  }
}

/** Resolves intrinsics in a template's values. */
export class Resolver {
  readonly #template: TemplateJson;
  readonly target: DeployTarget;

  constructor(template: TemplateJson, target: DeployTarget = TEST_TARGET) {
    this.#template = template;
    this.target = target;
  }

  /** `value` with every intrinsic replaced by its string (objects and arrays walked). */
  resolve(value: unknown): unknown {
    if (Array.isArray(value)) return value.map((v) => this.resolve(v));
    if (value === null || typeof value !== 'object') return value;
    const entries = Object.entries(value);
    const [fn, arg] = entries[0] ?? [];
    if (entries.length === 1 && fn !== undefined && (fn === 'Ref' || fn.startsWith('Fn::')))
      return this.#intrinsic(fn, arg);
    return Object.fromEntries(entries.map(([k, v]) => [k, this.resolve(v)]));
  }

  /** {@link resolve}, which must give a string. */
  string(value: unknown): string {
    const resolved = this.resolve(value);
    if (typeof resolved !== 'string')
      throw new UnsupportedIntrinsicError(
        `not a string: ${JSON.stringify(value)} → ${JSON.stringify(resolved)}`,
      );
    return resolved;
  }

  #intrinsic(fn: string, arg: unknown): unknown {
    switch (fn) {
      case 'Ref':
        return this.ref(String(arg));
      case 'Fn::GetAtt': {
        const [id, attribute] = Array.isArray(arg) ? arg : String(arg).split(/\.(.*)/s);
        return this.getAtt(String(id), String(this.resolve(attribute)));
      }
      case 'Fn::Join': {
        const [separator, parts] = arg as [string, unknown[]];
        const resolved = this.resolve(parts);
        if (!Array.isArray(resolved))
          throw new UnsupportedIntrinsicError(`Fn::Join of ${JSON.stringify(parts)}`);
        return resolved.map((p) => this.#asString(p)).join(separator);
      }
      case 'Fn::Select': {
        const [index, items] = arg as [unknown, unknown];
        const resolved = this.resolve(items);
        const i = Number(this.resolve(index));
        if (!Array.isArray(resolved) || !(i in resolved))
          throw new UnsupportedIntrinsicError(`Fn::Select ${i} of ${JSON.stringify(resolved)}`);
        return resolved[i];
      }
      case 'Fn::Split': {
        const [separator, source] = arg as [string, unknown];
        return this.string(source).split(separator);
      }
      case 'Fn::Sub': {
        const [text, vars] = typeof arg === 'string' ? [arg, {}] : (arg as [string, Record<string, unknown>]);
        return text.replace(/\$\{(!?)([^}]+)\}/g, (_all, literal: string, name: string) => {
          if (literal) return `\${${name}}`;
          if (name in vars) return this.string(vars[name]);
          const dot = name.indexOf('.');
          if (dot > 0) return this.#asString(this.getAtt(name.slice(0, dot), name.slice(dot + 1)));
          return this.#asString(this.ref(name));
        });
      }
      default:
        throw new UnsupportedIntrinsicError(`${fn} is not modelled`);
    }
  }

  #asString(value: unknown): string {
    if (typeof value !== 'string' && typeof value !== 'number')
      throw new UnsupportedIntrinsicError(`not a string: ${JSON.stringify(value)}`);
    return String(value);
  }

  /** The value of `Ref` to a pseudo parameter, a parameter (its default) or a resource. */
  ref(id: string): unknown {
    const t = this.target;
    const pseudo: Record<string, string> = {
      'AWS::Partition': t.partition,
      'AWS::Region': t.region,
      'AWS::AccountId': t.account,
      'AWS::URLSuffix': 'amazonaws.com',
      'AWS::StackName': t.stackName,
      'AWS::StackId': `arn:${t.partition}:cloudformation:${t.region}:${t.account}:stack/${t.stackName}/0`,
    };
    if (id in pseudo) return pseudo[id];
    const parameter = this.#template.Parameters?.[id];
    if (parameter !== undefined) {
      if (parameter.Default === undefined)
        throw new UnsupportedIntrinsicError(`parameter ${id} has no default`);
      return parameter.Default;
    }
    const model = this.#model(id);
    return model.ref;
  }

  /** The value of `Fn::GetAtt` of a resource. */
  getAtt(id: string, attribute: string): string {
    const model = this.#model(id);
    const value = model.attributes[attribute];
    if (value === undefined)
      throw new UnsupportedIntrinsicError(`Fn::GetAtt ${id}.${attribute} (${model.type}) is not modelled`);
    return value;
  }

  /** The physical name of a resource: its name property, or one CloudFormation would generate. */
  physicalName(id: string, nameProperty: string | undefined): string {
    const resource = this.#resource(id);
    const named = nameProperty === undefined ? undefined : readPath(resource.Properties ?? {}, nameProperty);
    if (named !== undefined) return this.string(named);
    return `${this.target.stackName}-${id}-GENERATED`;
  }

  #resource(id: string): TemplateResource {
    const resource = this.#template.Resources[id];
    if (resource === undefined) throw new UnsupportedIntrinsicError(`no resource ${id} in the template`);
    return resource;
  }

  #model(id: string): { type: string; ref: string; attributes: Record<string, string> } {
    const { Type: type, Properties: props = {} } = this.#resource(id);
    const { partition: p, region: r, account: a } = this.target;
    const name = (property: string | undefined) => this.physicalName(id, property);
    switch (type) {
      case 'AWS::S3::Bucket': {
        const n = name('BucketName').toLowerCase();
        return {
          type,
          ref: n,
          attributes: { Arn: `arn:${p}:s3:::${n}`, DomainName: `${n}.s3.amazonaws.com` },
        };
      }
      case 'AWS::SQS::Queue': {
        const n = name('QueueName');
        const url = `https://sqs.${r}.amazonaws.com/${a}/${n}`;
        return {
          type,
          ref: url,
          attributes: { Arn: `arn:${p}:sqs:${r}:${a}:${n}`, QueueName: n, QueueUrl: url },
        };
      }
      case 'AWS::DynamoDB::Table': {
        const n = name('TableName');
        return { type, ref: n, attributes: { Arn: `arn:${p}:dynamodb:${r}:${a}:table/${n}` } };
      }
      case 'AWS::SecretsManager::Secret': {
        const arn = `arn:${p}:secretsmanager:${r}:${a}:secret:${name('Name')}-${SECRET_SUFFIX}`;
        return { type, ref: arn, attributes: { Id: arn } };
      }
      case 'AWS::Logs::LogGroup': {
        const n = name('LogGroupName');
        return { type, ref: n, attributes: { Arn: `arn:${p}:logs:${r}:${a}:log-group:${n}:*` } };
      }
      case 'AWS::IAM::Role': {
        const n = name('RoleName');
        const path = typeof props.Path === 'string' ? props.Path : '/';
        return {
          type,
          ref: n,
          attributes: { Arn: `arn:${p}:iam::${a}:role${path}${n}`, RoleId: `AROA${id}` },
        };
      }
      case 'AWS::IAM::ManagedPolicy': {
        const path = typeof props.Path === 'string' ? props.Path : '/';
        const arn = `arn:${p}:iam::${a}:policy${path}${name('ManagedPolicyName')}`;
        return { type, ref: arn, attributes: { PolicyArn: arn } };
      }
      case 'AWS::Lambda::Function': {
        const n = name('FunctionName');
        return { type, ref: n, attributes: { Arn: `arn:${p}:lambda:${r}:${a}:function:${n}` } };
      }
      case 'AWS::SNS::Topic': {
        const arn = `arn:${p}:sns:${r}:${a}:${name('TopicName')}`;
        return { type, ref: arn, attributes: { TopicArn: arn, TopicName: name('TopicName') } };
      }
      case 'AWS::Athena::WorkGroup':
        return { type, ref: name('Name'), attributes: {} };
      case 'AWS::Glue::Database':
        return { type, ref: name('DatabaseInput.Name'), attributes: {} };
      case 'AWS::Glue::Table':
        return { type, ref: name('TableInput.Name'), attributes: {} };
      case 'AWS::Events::EventBus': {
        const n = name('Name');
        return { type, ref: n, attributes: { Arn: `arn:${p}:events:${r}:${a}:event-bus/${n}`, Name: n } };
      }
      default:
        throw new UnsupportedIntrinsicError(`Ref/GetAtt of ${type} (${id}) is not modelled`);
    }
  }
}

function readPath(object: Readonly<Record<string, unknown>>, path: string): unknown {
  let value: unknown = object;
  for (const part of path.split('.')) {
    if (value === null || typeof value !== 'object') return undefined;
    value = (value as Record<string, unknown>)[part];
  }
  return value;
}
