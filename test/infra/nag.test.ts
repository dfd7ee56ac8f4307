/**
 * cdk-nag (AwsSolutions): zero unacknowledged findings in the default and the fully configured
 * stack, and a reason on every acknowledgment.
 */
import { Validations } from 'aws-cdk-lib';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import { AwsSolutionsChecks } from 'cdk-nag';
import type { IConstruct } from 'constructs';
import { afterAll, describe, expect, it } from 'vitest';
import { removeSynthOutputs, synthExporter } from './helpers.js';

const EVERYTHING = {
  apiBaseUrl: 'https://api.acme.test',
  fixedEgressIp: true,
  alarmEmail: 'ops@acme.test',
  fullRefreshCron: '0 3 ? * SUN *',
  dataPrefix: 'exports/acme',
};

const findings = (scope: IConstruct) =>
  new AwsSolutionsChecks()
    .validateScope(scope)
    .violations.flatMap((v) =>
      v.violatingResources.map((r) => `${v.ruleName} at ${r.constructPath ?? r.resourceLogicalId}`),
    );

/** Every acknowledgment in the tree: rule id → reason. */
function acknowledgments(scope: IConstruct): [string, string][] {
  const out: [string, string][] = [];
  for (const c of scope.node.findAll()) {
    for (const entry of c.node.metadata) {
      if (entry.type === Validations.ACKNOWLEDGED_RULES_METADATA_KEY) {
        for (const [id, reason] of Object.entries(entry.data as Record<string, string>))
          out.push([id, reason]);
      }
    }
  }
  return out;
}

afterAll(removeSynthOutputs);

describe('cdk-nag AwsSolutions', () => {
  for (const [label, context] of [
    ['default (cdk.json)', {}],
    ['everything configured', EVERYTHING],
    ['existing secret by name', { existingSecretName: 'acme/key' }],
    [
      'another stage, an imported secret under a customer key, a given Elastic IP',
      {
        stage: 'staging',
        existingSecretArn: 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:acme/key-AbCdEf',
        existingSecretKmsKeyArn:
          'arn:aws:kms:eu-west-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab',
        fixedEgressIp: true,
        egressEipAllocationId: 'eipalloc-0123456789abcdef0',
      },
    ],
  ] as const) {
    it(`has zero unacknowledged findings: ${label}`, () => {
      // synth itself runs the checks and throws on a finding; validateScope lists them.
      const { app } = synthExporter(context);
      expect(findings(app)).toEqual([]);
    });
  }

  it('gives every acknowledgment a reason', () => {
    const { app } = synthExporter(EVERYTHING);
    const acks = acknowledgments(app).filter(([id]) => id.includes('AwsSolutions'));
    expect(acks.length).toBeGreaterThan(0);
    for (const [id, reason] of acks) expect(reason.length, id).toBeGreaterThan(40);
  });

  it('would report a finding the stack does not acknowledge (the check is live)', () => {
    const { app, stack } = synthExporter({});
    new sqs.Queue(stack, 'UnguardedQueue');
    expect(findings(app)).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^AwsSolutions-SQS3/),
        expect.stringMatching(/^AwsSolutions-SQS4/),
      ]),
    );
  });
});
