import { describe, expect, it } from 'vitest';
import {
  evaluate,
  type IamRequest,
  type NamedPolicy,
  type Statement,
  UnsupportedPolicyError,
} from './policy.js';

const ROLE = 'arn:aws:iam::123456789012:role/start-run';
const OBJECT = 'arn:aws:s3:::lake/state/runs/r1/run.json';

const policy = (...statements: Statement[]): NamedPolicy => ({
  name: 'p',
  document: { Statement: statements },
});
const request = (over: Partial<IamRequest> = {}): IamRequest => ({
  principal: ROLE,
  action: 's3:GetObject',
  resource: OBJECT,
  context: {},
  ...over,
});
const decision = (r: IamRequest, ...statements: Statement[]) =>
  evaluate(r, { identity: [policy(...statements)] }).decision;

describe('the IAM evaluator', () => {
  it('allows what a statement names and denies everything else implicitly', () => {
    const grant: Statement = { Sid: 'Read', Effect: 'Allow', Action: 's3:GetObject', Resource: OBJECT };

    expect(evaluate(request(), { identity: [policy(grant)] })).toEqual({ decision: 'allow', by: 'p#Read' });
    expect(decision(request({ action: 's3:PutObject' }), grant)).toBe('implicit-deny');
    expect(decision(request({ resource: `${OBJECT}x` }), grant)).toBe('implicit-deny');
    expect(evaluate(request(), { identity: [] }).decision).toBe('implicit-deny');
  });

  it('lets an explicit Deny win over any Allow, in the identity or the resource policy', () => {
    const allow: Statement = { Effect: 'Allow', Action: 's3:*', Resource: '*' };
    const deny: Statement = { Sid: 'No', Effect: 'Deny', Action: 's3:GetObject', Resource: OBJECT };

    expect(decision(request(), allow, deny)).toBe('explicit-deny');
    const bucketDeny = policy({ ...deny, Principal: { AWS: '*' } });
    expect(evaluate(request(), { identity: [policy(allow)], resource: [bucketDeny] }).decision).toBe(
      'explicit-deny',
    );
  });

  it('matches actions case-insensitively with * and ?, resources case-sensitively', () => {
    expect(decision(request(), { Effect: 'Allow', Action: 'S3:get*', Resource: '*' })).toBe('allow');
    expect(decision(request(), { Effect: 'Allow', Action: 's3:?etObject', Resource: '*' })).toBe('allow');
    expect(decision(request(), { Effect: 'Allow', Action: 's3:Get', Resource: '*' })).toBe('implicit-deny');
    const resource = (pattern: string) =>
      decision(request(), { Effect: 'Allow', Action: 's3:GetObject', Resource: pattern });
    expect(resource('arn:aws:s3:::lake/state/runs/*/run.json')).toBe('allow');
    // `*` spans slashes, as in IAM.
    expect(resource('arn:aws:s3:::lake/state/*')).toBe('allow');
    expect(resource('arn:aws:s3:::lake/state/runs/r?/run.json')).toBe('allow');
    expect(resource('arn:aws:s3:::lake/state/runs/r??/run.json')).toBe('implicit-deny');
    expect(resource('arn:aws:s3:::LAKE/*')).toBe('implicit-deny');
    // Regex characters in a pattern are literal.
    expect(resource('arn:aws:s3:::lake/state/runs/r1/run.jso.')).toBe('implicit-deny');
  });

  it('reads NotAction and NotResource as everything but', () => {
    const allowAllBut: Statement = { Effect: 'Allow', NotAction: 's3:Delete*', Resource: '*' };
    expect(decision(request(), allowAllBut)).toBe('allow');
    expect(decision(request({ action: 's3:DeleteObject' }), allowAllBut)).toBe('implicit-deny');
    const outside: Statement = { Effect: 'Deny', Action: 's3:*', NotResource: 'arn:aws:s3:::lake/*' };
    const everything: Statement = { Effect: 'Allow', Action: 's3:*', Resource: '*' };
    expect(decision(request(), everything, outside)).toBe('allow');
    expect(decision(request({ resource: 'arn:aws:s3:::other/k' }), everything, outside)).toBe(
      'explicit-deny',
    );
  });

  it('applies a resource policy statement only to the principals it names', () => {
    const grant = (principal: unknown): NamedPolicy =>
      policy({ Effect: 'Allow', Action: 's3:GetObject', Resource: OBJECT, Principal: principal });
    const check = (principal: unknown) =>
      evaluate(request(), { identity: [], resource: [grant(principal)] }).decision;

    expect(check({ AWS: ROLE })).toBe('allow');
    expect(check({ AWS: 'arn:aws:iam::123456789012:root' })).toBe('allow');
    expect(check({ AWS: '*' })).toBe('allow');
    expect(check('*')).toBe('allow');
    expect(check({ AWS: 'arn:aws:iam::999999999999:root' })).toBe('implicit-deny');
    expect(check({ Service: 'lambda.amazonaws.com' })).toBe('implicit-deny');
  });

  describe('conditions', () => {
    const list = (condition: Statement['Condition'], context: IamRequest['context']) =>
      decision(request({ action: 's3:ListBucket', resource: 'arn:aws:s3:::lake', context }), {
        Effect: 'Allow',
        Action: 's3:ListBucket',
        Resource: 'arn:aws:s3:::lake',
        Condition: condition,
      });

    it('StringLike and StringEquals match any of their values; a missing key fails them', () => {
      const like = { StringLike: { 's3:prefix': ['parquet/*', 'raw/*'] } };
      expect(list(like, { 's3:prefix': 'raw/x' })).toBe('allow');
      expect(list(like, { 's3:prefix': 'state/x' })).toBe('implicit-deny');
      expect(list(like, {})).toBe('implicit-deny');
      expect(list({ StringEquals: { 's3:prefix': 'raw/' } }, { 's3:prefix': 'raw/' })).toBe('allow');
      expect(list({ StringEquals: { 's3:prefix': 'raw/' } }, { 's3:prefix': 'RAW/' })).toBe('implicit-deny');
      expect(list({ StringEqualsIgnoreCase: { 's3:prefix': 'raw/' } }, { 's3:prefix': 'RAW/' })).toBe(
        'allow',
      );
    });

    it('negated operators hold on a missing key; IfExists holds on a missing key', () => {
      expect(list({ StringNotLike: { 's3:prefix': 'state/*' } }, {})).toBe('allow');
      expect(list({ StringNotLike: { 's3:prefix': 'state/*' } }, { 's3:prefix': 'state/x' })).toBe(
        'implicit-deny',
      );
      expect(list({ StringLikeIfExists: { 's3:prefix': 'raw/*' } }, {})).toBe('allow');
      expect(list({ StringLikeIfExists: { 's3:prefix': 'raw/*' } }, { 's3:prefix': 'x' })).toBe(
        'implicit-deny',
      );
    });

    it('all operators and keys must hold together', () => {
      const both = { StringLike: { 's3:prefix': 'raw/*' }, Bool: { 'aws:SecureTransport': 'true' } };
      expect(list(both, { 's3:prefix': 'raw/x', 'aws:SecureTransport': 'true' })).toBe('allow');
      expect(list(both, { 's3:prefix': 'raw/x', 'aws:SecureTransport': 'false' })).toBe('implicit-deny');
    });

    it('Bool, Null and the numeric operators (the TLS-only bucket policy)', () => {
      const tlsOnly: NamedPolicy = policy(
        {
          Effect: 'Deny',
          Principal: { AWS: '*' },
          Action: 's3:*',
          Resource: '*',
          Condition: { Bool: { 'aws:SecureTransport': 'false' } },
        },
        {
          Effect: 'Deny',
          Principal: { AWS: '*' },
          Action: 's3:*',
          Resource: '*',
          Condition: { NumericLessThan: { 's3:TlsVersion': 1.2 } },
        },
      );
      const allow = policy({ Effect: 'Allow', Action: 's3:GetObject', Resource: OBJECT });
      const on = (context: IamRequest['context']) =>
        evaluate(request({ context }), { identity: [allow], resource: [tlsOnly] }).decision;

      expect(on({ 'aws:SecureTransport': 'true', 's3:TlsVersion': '1.3' })).toBe('allow');
      expect(on({ 'aws:SecureTransport': 'false', 's3:TlsVersion': '1.3' })).toBe('explicit-deny');
      expect(on({ 'aws:SecureTransport': 'true', 's3:TlsVersion': '1.1' })).toBe('explicit-deny');
      expect(list({ Null: { 's3:prefix': 'true' } }, {})).toBe('allow');
      expect(list({ Null: { 's3:prefix': 'true' } }, { 's3:prefix': 'x' })).toBe('implicit-deny');
      expect(list({ Null: { 's3:prefix': 'false' } }, { 's3:prefix': 'x' })).toBe('allow');
    });

    it('ArnLike matches each part of the ARN on its own', () => {
      const arn = { ArnLike: { 'aws:SourceArn': 'arn:aws:sqs:*:123456789012:exporter-*' } };
      expect(list(arn, { 'aws:SourceArn': 'arn:aws:sqs:eu-west-1:123456789012:exporter-plan' })).toBe(
        'allow',
      );
      expect(list(arn, { 'aws:SourceArn': 'arn:aws:sqs:eu-west-1:999999999999:exporter-plan' })).toBe(
        'implicit-deny',
      );
      expect(
        list(
          { ArnEquals: { 'aws:SourceArn': 'arn:aws:sqs:eu-west-1:1:q' } },
          { 'aws:SourceArn': 'arn:aws:sqs:eu-west-1:1:q' },
        ),
      ).toBe('allow');
    });

    it('set operators over a multivalued key', () => {
      const tags = (condition: Statement['Condition']) => list(condition, { 'aws:TagKeys': ['a', 'b'] });
      expect(tags({ 'ForAllValues:StringEquals': { 'aws:TagKeys': ['a', 'b', 'c'] } })).toBe('allow');
      expect(tags({ 'ForAllValues:StringEquals': { 'aws:TagKeys': ['a'] } })).toBe('implicit-deny');
      expect(tags({ 'ForAnyValue:StringEquals': { 'aws:TagKeys': ['b'] } })).toBe('allow');
      expect(() => tags({ StringEquals: { 'aws:TagKeys': 'a' } })).toThrow(UnsupportedPolicyError);
    });

    it('fails loudly on an operator it does not model, or a policy variable', () => {
      expect(() => list({ DateLessThan: { 'aws:CurrentTime': '2030-01-01' } }, {})).toThrow(
        /DateLessThan is not modelled/,
      );
      expect(() => list({ IpAddress: { 'aws:SourceIp': '10.0.0.0/8' } }, {})).toThrow(UnsupportedPolicyError);
      expect(() =>
        decision(request(), {
          Effect: 'Allow',
          Action: 's3:GetObject',
          // biome-ignore lint/suspicious/noTemplateCurlyInString: an IAM policy variable, not a template
          Resource: 'arn:aws:s3:::lake/${aws:username}/*',
        }),
      ).toThrow(/policy variables/);
    });
  });

  it('refuses statements it cannot read: NotPrincipal, a Principal in an identity policy, no Action', () => {
    const base: Statement = { Effect: 'Allow', Action: 's3:GetObject', Resource: '*' };
    expect(() =>
      evaluate(request(), { identity: [], resource: [policy({ ...base, NotPrincipal: { AWS: ROLE } })] }),
    ).toThrow(/NotPrincipal/);
    expect(() => decision(request(), { ...base, Principal: '*' })).toThrow(/identity policy has a Principal/);
    expect(() => decision(request(), { Effect: 'Allow', Resource: '*' })).toThrow(/Action/);
  });
});
