import { describe, expect, it } from 'vitest';
import { FUNCTION_NAMES } from '../../../infra/constructs/functions.js';
import { Deployment, rolePolicies } from './deployment.js';
import { Resolver, type TemplateJson } from './intrinsics.js';

const TEMPLATE: TemplateJson = {
  Parameters: { Stage: { Default: 'qa' }, NoDefault: {} },
  Resources: {
    Bucket: { Type: 'AWS::S3::Bucket' },
    // biome-ignore lint/suspicious/noTemplateCurlyInString: Fn::Sub's syntax, not a template
    Named: { Type: 'AWS::SQS::Queue', Properties: { QueueName: { 'Fn::Sub': 'exporter-${Stage}-plan' } } },
    Secret: { Type: 'AWS::SecretsManager::Secret', Properties: { Name: 'acme/key' } },
    Topic: { Type: 'AWS::SNS::Topic' },
    Vpc: { Type: 'AWS::EC2::VPC' },
  },
};

describe('the intrinsics resolver', () => {
  const r = new Resolver(TEMPLATE);

  it('resolves pseudo parameters, parameter defaults, Ref and Fn::GetAtt of resources', () => {
    expect(r.resolve({ Ref: 'AWS::Partition' })).toBe('aws');
    expect(r.resolve({ Ref: 'AWS::Region' })).toBe('eu-west-1');
    expect(r.resolve({ Ref: 'AWS::AccountId' })).toBe('123456789012');
    expect(r.resolve({ Ref: 'AWS::URLSuffix' })).toBe('amazonaws.com');
    expect(r.resolve({ Ref: 'Stage' })).toBe('qa');
    expect(r.resolve({ 'Fn::GetAtt': ['Named', 'Arn'] })).toBe(
      'arn:aws:sqs:eu-west-1:123456789012:exporter-qa-plan',
    );
    expect(r.resolve({ Ref: 'Named' })).toBe(
      'https://sqs.eu-west-1.amazonaws.com/123456789012/exporter-qa-plan',
    );
    expect(r.resolve({ Ref: 'Secret' })).toMatch(
      /^arn:aws:secretsmanager:eu-west-1:123456789012:secret:acme\/key-\w{6}$/,
    );
    // Without a name, one is generated, the same every time.
    expect(r.resolve({ 'Fn::GetAtt': 'Bucket.Arn' })).toBe(r.resolve({ 'Fn::GetAtt': ['Bucket', 'Arn'] }));
    expect(r.string({ Ref: 'Bucket' })).toMatch(/^[a-z0-9-]+$/);
  });

  it('resolves Fn::Join, Fn::Sub (with variables and literals), Fn::Select and Fn::Split, nested', () => {
    expect(r.resolve({ 'Fn::Join': ['', [{ 'Fn::GetAtt': ['Named', 'Arn'] }, '/x']] })).toBe(
      'arn:aws:sqs:eu-west-1:123456789012:exporter-qa-plan/x',
    );
    expect(
      // biome-ignore lint/suspicious/noTemplateCurlyInString: Fn::Sub's syntax, not a template
      r.resolve({ 'Fn::Sub': ['${A}-${Named.QueueName}-${!Literal}', { A: { Ref: 'AWS::Region' } }] }),
      // biome-ignore lint/suspicious/noTemplateCurlyInString: Fn::Sub's literal, not a template
    ).toBe('eu-west-1-exporter-qa-plan-${Literal}');
    expect(r.resolve({ 'Fn::Select': [1, { 'Fn::Split': [':', { 'Fn::GetAtt': ['Named', 'Arn'] }] }] })).toBe(
      'aws',
    );
    expect(r.resolve({ a: [{ Ref: 'Stage' }, 'b'] })).toEqual({ a: ['qa', 'b'] });
  });

  it('throws on what it does not model', () => {
    expect(() => r.resolve({ 'Fn::If': ['C', 'a', 'b'] })).toThrow(/Fn::If is not modelled/);
    expect(() => r.resolve({ Ref: 'NoDefault' })).toThrow(/no default/);
    expect(() => r.resolve({ Ref: 'Missing' })).toThrow(/no resource Missing/);
    expect(() => r.resolve({ Ref: 'Vpc' })).toThrow(/AWS::EC2::VPC/);
    expect(() => r.resolve({ 'Fn::GetAtt': ['Topic', 'Nope'] })).toThrow(/Topic.Nope/);
  });
});

describe('the deployed stack', () => {
  it('collects each function role’s policies and environment, resolved', async () => {
    const deployment = await Deployment.load();

    for (const name of FUNCTION_NAMES) {
      const fn = deployment.functions[name];
      expect(fn.roleArn).toMatch(/^arn:aws:iam::123456789012:role\//);
      expect(fn.policies.length).toBeGreaterThan(0);
      expect(fn.environment.DATA_BUCKET).toMatch(/^[a-z0-9-]+$/);
      expect(JSON.stringify(fn.policies)).not.toMatch(/"(Ref|Fn::[A-Za-z]+)"/);
    }
    expect(deployment.functions['start-run'].environment.PLAN_QUEUE_URL).toMatch(
      /^https:\/\/sqs\.eu-west-1\.amazonaws\.com\/123456789012\//,
    );
    const bucket = deployment.functions['start-run'].environment.DATA_BUCKET!;
    expect(deployment.bucketPolicies(bucket).map((p) => JSON.stringify(p.document))).toEqual([
      expect.stringContaining('aws:SecureTransport'),
    ]);
    expect(deployment.managedPolicy('Analysts').arn).toMatch(/^arn:aws:iam::123456789012:policy\//);
  });

  it('takes managed policies, inline policies and AWS managed policies it knows; refuses the others', () => {
    const allow = (action: string) => ({ Statement: [{ Effect: 'Allow', Action: action, Resource: '*' }] });
    const template = (role: Record<string, unknown>): TemplateJson => ({
      Resources: {
        Role: { Type: 'AWS::IAM::Role', Properties: role },
        Attached: {
          Type: 'AWS::IAM::Policy',
          Properties: { PolicyDocument: allow('s3:GetObject'), Roles: [{ Ref: 'Role' }] },
        },
        Elsewhere: {
          Type: 'AWS::IAM::Policy',
          Properties: { PolicyDocument: allow('s3:*'), Roles: [{ Ref: 'Other' }] },
        },
        Managed: {
          Type: 'AWS::IAM::ManagedPolicy',
          Properties: { PolicyDocument: allow('sqs:SendMessage') },
        },
      },
    });
    const policiesOf = (role: Record<string, unknown>) => {
      const t = template(role);
      return rolePolicies(t, new Resolver(t), 'Role');
    };

    const policies = policiesOf({
      Policies: [{ PolicyName: 'inline', PolicyDocument: allow('events:PutEvents') }],
      ManagedPolicyArns: [
        { Ref: 'Managed' },
        {
          'Fn::Join': [
            '',
            ['arn:', { Ref: 'AWS::Partition' }, ':iam::aws:policy/service-role/AWSLambdaBasicExecutionRole'],
          ],
        },
      ],
    });

    expect(policies.map((p) => p.name)).toEqual([
      'Attached',
      'Role/inline',
      'Managed',
      'service-role/AWSLambdaBasicExecutionRole',
    ]);
    expect(() => policiesOf({ ManagedPolicyArns: ['arn:aws:iam::aws:policy/AdministratorAccess'] })).toThrow(
      /AdministratorAccess is not modelled/,
    );
    expect(() => policiesOf({ PermissionsBoundary: 'arn:aws:iam::123456789012:policy/b' })).toThrow(
      /boundaries/,
    );
  });
});
