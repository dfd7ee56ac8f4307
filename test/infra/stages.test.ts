/**
 * Stages: two deployments side by side in one account and region. Every physical name derives
 * from the stage, and `prod` keeps the names deployments had before stages existed.
 */
import { Stack } from 'aws-cdk-lib';
import type { Template } from 'aws-cdk-lib/assertions';
import type * as s3 from 'aws-cdk-lib/aws-s3';
import type * as secretsmanager from 'aws-cdk-lib/aws-secretsmanager';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApiKeySecret } from '../../infra/constructs/api-key-secret.js';
import { DataLake } from '../../infra/constructs/data-lake.js';
import type { ExporterStack } from '../../infra/exporter-stack.js';
import { removeSynthOutputs, resourcesOf, synthStages, testApp } from './helpers.js';

/**
 * Properties that hold a plain string ending in `Name` but name nothing in the account: what
 * they name lives inside another resource (a named query in its stage's workgroup, an inline
 * policy in its role) or is not a name at all (a metric).
 */
const NOT_PHYSICAL: Readonly<Record<string, readonly string[]>> = {
  'AWS::IAM::Policy': ['PolicyName'],
  'AWS::CloudWatch::Alarm': ['MetricName'],
  'AWS::Athena::NamedQuery': ['Name'],
};

/** Every physical name in a template: `<type>.<property>=<value>`, without the stage-specific part. */
function physicalNames(template: Template): Map<string, string> {
  const names = new Map<string, string>();
  const json = template.toJSON() as {
    Resources: Record<string, { Type: string; Properties?: Record<string, unknown> }>;
    Outputs?: Record<string, { Export?: { Name?: unknown } }>;
  };
  for (const [id, resource] of Object.entries(json.Resources)) {
    const props = resource.Properties ?? {};
    for (const [key, value] of Object.entries(props)) {
      if (!key.endsWith('Name') || typeof value !== 'string') continue;
      if (NOT_PHYSICAL[resource.Type]?.includes(key)) continue;
      names.set(`${resource.Type}.${key}=${value}`, id);
    }
    const databaseInput = props.DatabaseInput as { Name?: unknown } | undefined;
    if (typeof databaseInput?.Name === 'string')
      names.set(`${resource.Type}.DatabaseInput.Name=${databaseInput.Name}`, id);
  }
  for (const [id, output] of Object.entries(json.Outputs ?? {})) {
    if (output.Export?.Name !== undefined) names.set(`Export=${JSON.stringify(output.Export.Name)}`, id);
  }
  return names;
}

let stacks: ExporterStack[];
let templates: Template[];

beforeAll(() => {
  ({ stacks, templates } = synthStages(['prod', 'staging']));
});
afterAll(removeSynthOutputs);

const functionEnv = (template: Template) =>
  Object.values(resourcesOf(template, 'AWS::Lambda::Function')).map(
    (f) => (f.Properties.Environment as { Variables: Record<string, unknown> }).Variables,
  );

describe('two stages in one app', () => {
  it('keeps the names of an existing deployment for prod (it updates in place)', () => {
    const prod = stacks[0]!;
    expect(prod.stackName).toBe('CampaignReportExporter');
    expect(prod.node.id).toBe('CampaignReportExporter');
    const t = templates[0]!;
    t.hasResourceProperties('AWS::SecretsManager::Secret', {
      Name: 'CampaignReportExporter/integration-api-key',
    });
    t.hasResourceProperties('AWS::Glue::Database', { DatabaseInput: { Name: 'campaign_report_exporter' } });
    t.hasResourceProperties('AWS::Athena::WorkGroup', { Name: 'CampaignReportExporter' });
    for (const env of functionEnv(t)) expect(env.POWERTOOLS_SERVICE_NAME).toBe('campaign-report-exporter');
  });

  it('keeps the logical ids the resources had when the stack held the constructs directly', () => {
    // How the stack was built before the construct existed: its parts straight in the stack.
    const before = new Stack(testApp(), 'CampaignReportExporter');
    const lake = new DataLake(before, 'DataLake', {
      dataPrefix: '',
      rawRetentionDays: 365,
      athenaResultsRetentionDays: 7,
      quarantineRetentionDays: 90,
    });
    const key = new ApiKeySecret(before, 'ApiKey', {
      secretName: 'CampaignReportExporter/integration-api-key',
    });
    const now = stacks[0]!.exporter;
    const idIn = (stack: Stack, c: s3.Bucket | secretsmanager.ISecret) =>
      stack.getLogicalId(c.node.defaultChild as s3.CfnBucket);
    expect(idIn(stacks[0]!, now.dataLake.bucket)).toBe(idIn(before, lake.bucket));
    expect(idIn(stacks[0]!, now.apiKey.secret)).toBe(idIn(before, key.secret));
    expect(idIn(before, lake.bucket)).toMatch(/^DataLakeBucket[0-9A-F]{8}$/);
  });

  it('derives every name of staging from its stage', () => {
    const staging = stacks[1]!;
    expect(staging.stackName).toBe('CampaignReportExporter-staging');
    const t = templates[1]!;
    t.hasResourceProperties('AWS::SecretsManager::Secret', {
      Name: 'CampaignReportExporter-staging/integration-api-key',
    });
    t.hasResourceProperties('AWS::Glue::Database', {
      DatabaseInput: { Name: 'campaign_report_exporter_staging' },
    });
    t.hasResourceProperties('AWS::Athena::WorkGroup', { Name: 'CampaignReportExporter-staging' });
    for (const env of functionEnv(t)) {
      expect(env.POWERTOOLS_SERVICE_NAME).toBe('campaign-report-exporter-staging');
    }
  });

  it('shares no physical name between the stages', () => {
    const [prod, staging] = templates.map(physicalNames) as [Map<string, string>, Map<string, string>];
    // The walk finds the names that matter (else an empty intersection proves nothing).
    expect([...prod.keys()]).toEqual(
      expect.arrayContaining([
        'AWS::SecretsManager::Secret.Name=CampaignReportExporter/integration-api-key',
        'AWS::Athena::WorkGroup.Name=CampaignReportExporter',
        'AWS::Glue::Database.DatabaseInput.Name=campaign_report_exporter',
      ]),
    );
    const shared = [...prod.keys()].filter((name) => staging.has(name));
    expect(shared).toEqual([]);
  });

  it('names the Glue tables in their stage database', () => {
    for (const [i, db] of ['campaign_report_exporter', 'campaign_report_exporter_staging'].entries()) {
      for (const table of Object.values(resourcesOf(templates[i]!, 'AWS::Glue::Table'))) {
        expect(table.Properties.DatabaseName).toBe(db);
      }
    }
  });

  it('keeps the plain output names in both stacks', () => {
    for (const t of templates) {
      const outputs = Object.keys((t.toJSON() as { Outputs: Record<string, unknown> }).Outputs);
      expect(outputs).toEqual(expect.arrayContaining(['PutKeyCommand', 'AlarmTopicArn', 'AnalystPolicyArn']));
    }
  });
});
