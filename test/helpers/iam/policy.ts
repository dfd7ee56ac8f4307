/**
 * A small IAM policy evaluator for the tests: explicit Deny > Allow > implicit deny, over
 * identity policies and resource policies of one account (a same-account request is allowed
 * when either kind allows it and nothing denies it). Actions and resources with `*` and `?`,
 * NotAction/NotResource, Principal in resource policies, and the condition operators below.
 * Anything it does not model (an unknown operator, NotPrincipal, policy variables) throws: a
 * grant the tests cannot read must fail them, not pass them.
 */

export type Effect = 'Allow' | 'Deny';

/** One statement, as in a policy document (values already resolved to strings). */
export interface Statement {
  readonly Sid?: string;
  readonly Effect: Effect;
  readonly Action?: string | readonly string[];
  readonly NotAction?: string | readonly string[];
  readonly Resource?: string | readonly string[];
  readonly NotResource?: string | readonly string[];
  readonly Principal?: unknown;
  readonly NotPrincipal?: unknown;
  readonly Condition?: Readonly<Record<string, Readonly<Record<string, unknown>>>>;
}

export interface PolicyDocument {
  readonly Version?: string;
  readonly Statement: Statement | readonly Statement[];
}

/** A policy and where it comes from (named in decisions). */
export interface NamedPolicy {
  readonly name: string;
  readonly document: PolicyDocument;
}

/** Context key values of a request: a string, or a list for a multivalued key. */
export type RequestContext = Readonly<Record<string, string | readonly string[] | undefined>>;

/** One authorization request: who, what, on which ARN, with which context keys. */
export interface IamRequest {
  /** The caller's ARN (matched against the Principal of resource policies). */
  readonly principal: string;
  /** `service:Action`. */
  readonly action: string;
  readonly resource: string;
  readonly context?: RequestContext;
}

export interface Decision {
  readonly decision: 'allow' | 'explicit-deny' | 'implicit-deny';
  /** The statement that decided (`policy#sid` or `policy#index`), for an allow or an explicit deny. */
  readonly by?: string;
}

export interface Policies {
  /** The caller's identity policies. */
  readonly identity: readonly NamedPolicy[];
  /** The resource's policies (a bucket policy). */
  readonly resource?: readonly NamedPolicy[];
}

/** Thrown for anything in a policy the evaluator does not model. */
export class UnsupportedPolicyError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UnsupportedPolicyError';
  }
}

/** Evaluates `request` against the policies: an explicit Deny wins, then an Allow, else implicit deny. */
export function evaluate(request: IamRequest, policies: Policies): Decision {
  const all = [
    ...policies.identity.map((policy) => ({ policy, resourcePolicy: false })),
    ...(policies.resource ?? []).map((policy) => ({ policy, resourcePolicy: true })),
  ];
  const matched: { effect: Effect; by: string }[] = [];
  for (const { policy, resourcePolicy } of all) {
    statementsOf(policy.document).forEach((statement, index) => {
      if (statementMatches(statement, request, resourcePolicy, policy.name))
        matched.push({ effect: statement.Effect, by: `${policy.name}#${statement.Sid ?? index}` });
    });
  }
  const deny = matched.find((m) => m.effect === 'Deny');
  if (deny) return { decision: 'explicit-deny', by: deny.by };
  const allow = matched.find((m) => m.effect === 'Allow');
  return allow ? { decision: 'allow', by: allow.by } : { decision: 'implicit-deny' };
}

function statementsOf(document: PolicyDocument): readonly Statement[] {
  const s = document.Statement;
  return Array.isArray(s) ? s : [s as Statement];
}

const list = (v: string | readonly string[] | undefined): readonly string[] =>
  v === undefined ? [] : typeof v === 'string' ? [v] : v;

function statementMatches(s: Statement, r: IamRequest, resourcePolicy: boolean, policy: string): boolean {
  const where = `${policy}#${s.Sid ?? '?'}`;
  if (s.Effect !== 'Allow' && s.Effect !== 'Deny')
    throw new UnsupportedPolicyError(`${where}: Effect ${s.Effect}`);
  if (s.NotPrincipal !== undefined)
    throw new UnsupportedPolicyError(`${where}: NotPrincipal is not modelled`);
  if (resourcePolicy && !principalMatches(s.Principal, r.principal, where)) return false;
  if (!resourcePolicy && s.Principal !== undefined)
    throw new UnsupportedPolicyError(`${where}: an identity policy has a Principal`);
  if ((s.Action === undefined) === (s.NotAction === undefined))
    throw new UnsupportedPolicyError(`${where}: needs exactly one of Action and NotAction`);
  const action = s.Action !== undefined;
  const actionHit = list(s.Action ?? s.NotAction).some((p) => wildcardMatch(p, r.action, true));
  if (action !== actionHit) return false;
  if ((s.Resource === undefined) === (s.NotResource === undefined))
    throw new UnsupportedPolicyError(`${where}: needs exactly one of Resource and NotResource`);
  const resource = s.Resource !== undefined;
  const patterns = list(s.Resource ?? s.NotResource);
  for (const p of patterns) noVariables(p, where);
  const resourceHit = patterns.some((p) => wildcardMatch(p, r.resource, false));
  if (resource !== resourceHit) return false;
  return conditionsMatch(s.Condition ?? {}, r.context ?? {}, where);
}

function principalMatches(principal: unknown, caller: string, where: string): boolean {
  if (principal === '*') return true;
  if (principal === null || typeof principal !== 'object')
    throw new UnsupportedPolicyError(`${where}: Principal ${JSON.stringify(principal)}`);
  for (const [kind, value] of Object.entries(principal)) {
    if (kind !== 'AWS') continue; // Service, Federated, CanonicalUser: never a role's session
    for (const p of list(value as string | string[])) {
      if (p === '*' || p === caller) return true;
      const account = /^arn:[^:]+:iam::(\d{12}):root$/.exec(p)?.[1] ?? (/^\d{12}$/.test(p) ? p : undefined);
      if (account !== undefined && caller.split(':')[4] === account) return true;
    }
  }
  return false;
}

function noVariables(value: string, where: string): void {
  if (value.includes('${'))
    throw new UnsupportedPolicyError(`${where}: policy variables are not modelled (${value})`);
}

const patternCache = new Map<string, RegExp>();

/** IAM wildcards: `*` any run of characters (also `/` and `:`), `?` any one character. */
export function wildcardMatch(pattern: string, value: string, ignoreCase: boolean): boolean {
  const cacheKey = `${ignoreCase ? 'i' : 's'}${pattern}`;
  let regex = patternCache.get(cacheKey);
  if (regex === undefined) {
    const body = pattern
      .split('')
      .map((c) => (c === '*' ? '.*' : c === '?' ? '.' : c.replace(/[.+^${}()|[\]\\]/g, '\\$&')))
      .join('');
    regex = new RegExp(`^${body}$`, ignoreCase ? 'is' : 's');
    patternCache.set(cacheKey, regex);
  }
  return regex.test(value);
}

/** ArnLike: each of the six colon-separated parts matched on its own (the last may hold colons). */
function arnLike(pattern: string, arn: string): boolean {
  const parts = (s: string) => {
    const p = s.split(':');
    return p.length < 6 ? undefined : [...p.slice(0, 5), p.slice(5).join(':')];
  };
  const a = parts(pattern);
  const b = parts(arn);
  if (a === undefined || b === undefined) return false;
  return a.every((segment, i) => wildcardMatch(segment, b[i] ?? '', false));
}

type Compare = (policyValue: string, requestValue: string) => boolean;

const number = (s: string) => {
  const n = Number(s);
  if (Number.isNaN(n)) throw new UnsupportedPolicyError(`not a number: ${s}`);
  return n;
};

/** The operators the evaluator knows; `negated` ones hold when the key is absent. */
const OPERATORS: Readonly<Record<string, { compare: Compare; negated: boolean }>> = {
  StringEquals: { compare: (p, v) => p === v, negated: false },
  StringNotEquals: { compare: (p, v) => p === v, negated: true },
  StringEqualsIgnoreCase: { compare: (p, v) => p.toLowerCase() === v.toLowerCase(), negated: false },
  StringNotEqualsIgnoreCase: { compare: (p, v) => p.toLowerCase() === v.toLowerCase(), negated: true },
  StringLike: { compare: (p, v) => wildcardMatch(p, v, false), negated: false },
  StringNotLike: { compare: (p, v) => wildcardMatch(p, v, false), negated: true },
  ArnEquals: { compare: (p, v) => arnLike(p, v), negated: false },
  ArnLike: { compare: (p, v) => arnLike(p, v), negated: false },
  ArnNotEquals: { compare: (p, v) => arnLike(p, v), negated: true },
  ArnNotLike: { compare: (p, v) => arnLike(p, v), negated: true },
  Bool: { compare: (p, v) => p.toLowerCase() === v.toLowerCase(), negated: false },
  NumericEquals: { compare: (p, v) => number(v) === number(p), negated: false },
  NumericNotEquals: { compare: (p, v) => number(v) === number(p), negated: true },
  NumericLessThan: { compare: (p, v) => number(v) < number(p), negated: false },
  NumericLessThanEquals: { compare: (p, v) => number(v) <= number(p), negated: false },
  NumericGreaterThan: { compare: (p, v) => number(v) > number(p), negated: false },
  NumericGreaterThanEquals: { compare: (p, v) => number(v) >= number(p), negated: false },
};

function conditionsMatch(
  conditions: Readonly<Record<string, Readonly<Record<string, unknown>>>>,
  context: RequestContext,
  where: string,
): boolean {
  for (const [operatorName, keys] of Object.entries(conditions)) {
    for (const [key, raw] of Object.entries(keys)) {
      const values = (Array.isArray(raw) ? raw : [raw]).map((v) => {
        if (typeof v !== 'string' && typeof v !== 'number' && typeof v !== 'boolean')
          throw new UnsupportedPolicyError(`${where}: condition value ${JSON.stringify(v)}`);
        const s = String(v);
        noVariables(s, where);
        return s;
      });
      if (!conditionHolds(operatorName, key, values, context[key], where)) return false;
    }
  }
  return true;
}

function conditionHolds(
  operatorName: string,
  key: string,
  values: readonly string[],
  actual: string | readonly string[] | undefined,
  where: string,
): boolean {
  if (operatorName === 'Null') {
    // `"true"`: the key must be absent; `"false"`: present.
    return values.some((v) => (v.toLowerCase() === 'true') === (actual === undefined));
  }
  const set = /^(ForAnyValue|ForAllValues):(.+)$/.exec(operatorName);
  const base = set ? set[2]! : operatorName;
  const ifExists = base.endsWith('IfExists');
  const name = ifExists ? base.slice(0, -'IfExists'.length) : base;
  const operator = OPERATORS[name];
  if (operator === undefined)
    throw new UnsupportedPolicyError(`${where}: condition operator ${operatorName} is not modelled`);
  if (actual === undefined) {
    if (ifExists) return true;
    if (set?.[1] === 'ForAllValues') return true; // every value of an empty set matches
    if (set?.[1] === 'ForAnyValue') return false;
    return operator.negated;
  }
  const hit = (v: string) => values.some((p) => operator.compare(p, v));
  // A negated operator holds when no policy value matches.
  const one = (v: string) => (operator.negated ? !hit(v) : hit(v));
  if (set) {
    const all = typeof actual === 'string' ? [actual] : actual;
    return set[1] === 'ForAllValues' ? all.every(one) : all.some(one);
  }
  if (typeof actual !== 'string')
    throw new UnsupportedPolicyError(
      `${where}: ${operatorName} on the multivalued key ${key} needs ForAnyValue/ForAllValues`,
    );
  return one(actual);
}
