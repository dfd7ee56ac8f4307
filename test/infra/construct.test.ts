/**
 * The exporter as a construct in a team's own CDK app: next to the team's resources in the
 * team's stack, with typed props, cdk-nag clean, outputs under the team's ids.
 */
import { CfnOutput, CfnResource, Stack, Validations } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import * as ssm from 'aws-cdk-lib/aws-ssm';
import { AwsSolutionsChecks } from 'cdk-nag';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CampaignReportExporter, type CampaignReportExporterProps } from '../../infra/exporter.js';
import { removeSynthOutputs, resourcesOf, testApp } from './helpers.js';

/** What a team writes: typed props, checked by the compiler (the tests are type-checked). */
const props: CampaignReportExporterProps = {
  apiBaseUrl: 'https://api.acme.test',
  stage: 'analytics',
  scheduleCron: '0 4 * * ? *',
  scheduleTimeZone: 'Europe/Berlin',
  alarmEmail: 'data@acme.test',
  logLevel: 'WARN',
  reportBatchSize: 4,
  dataPrefix: 'exports/acme/',
};

let stack: Stack;
let exporter: CampaignReportExporter;
let template: Template;
let app: ReturnType<typeof testApp>;

beforeAll(() => {
  app = testApp();
  Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
  stack = new Stack(app, 'TeamAnalytics', { env: { account: '111111111111', region: 'eu-central-1' } });
  // The team's own resources, before and after the exporter.
  new ssm.StringParameter(stack, 'Owner', { stringValue: 'data-platform' });
  exporter = new CampaignReportExporter(stack, 'Reports', props);
  new ssm.StringParameter(stack, 'ReportsBucket', { stringValue: exporter.dataLake.bucket.bucketName });
  for (const output of exporter.outputs) {
    new CfnOutput(stack, `Reports${output.name}`, { value: output.value, description: output.description });
  }
  app.synth(); // cdk-nag runs here and throws on an unacknowledged finding
  template = Template.fromStack(stack);
});
afterAll(removeSynthOutputs);

describe('CampaignReportExporter in a team’s stack', () => {
  it('synthesizes next to the team’s resources, with cdk-nag clean', () => {
    const findings = new AwsSolutionsChecks()
      .validateScope(app)
      .violations.flatMap((v) => v.violatingResources.map((r) => `${v.ruleName} at ${r.constructPath}`));
    expect(findings).toEqual([]);
    template.resourceCountIs('AWS::SSM::Parameter', 2);
    template.resourceCountIs('AWS::Glue::Database', 1);
  });

  it('keeps every resource of its own under its construct id', () => {
    const paths = stack.node
      .findAll()
      .filter((c): c is CfnResource => c instanceof CfnResource)
      .map((c) => c.node.path);
    const team = paths.filter((p) => !p.startsWith('TeamAnalytics/Reports/'));
    expect(team).toEqual(['TeamAnalytics/Owner/Resource', 'TeamAnalytics/ReportsBucket/Resource']);
    expect(paths.length).toBeGreaterThan(50);
    for (const id of Object.keys(resourcesOf(template, 'AWS::Lambda::Function'))) {
      expect(id.startsWith('Reports')).toBe(true);
    }
  });

  it('applies its props: the stage names, the schedule, the prefix', () => {
    expect(exporter.names.databaseName).toBe('campaign_report_exporter_analytics');
    template.hasResourceProperties('AWS::Glue::Database', {
      DatabaseInput: { Name: 'campaign_report_exporter_analytics' },
    });
    template.hasResourceProperties('AWS::SecretsManager::Secret', {
      Name: 'CampaignReportExporter-analytics/integration-api-key',
    });
    template.hasResourceProperties('AWS::Scheduler::Schedule', {
      ScheduleExpression: 'cron(0 4 * * ? *)',
      ScheduleExpressionTimezone: 'Europe/Berlin',
    });
    expect(exporter.config.dataPrefix).toBe('exports/acme/');
  });

  it('leaves the outputs to the stack, under ids the stack chooses', () => {
    const outputs = Object.keys((template.toJSON() as { Outputs: Record<string, unknown> }).Outputs);
    expect(outputs).toEqual(
      expect.arrayContaining(['ReportsPutKeyCommand', 'ReportsAnalystPolicyArn', 'ReportsDataBucketName']),
    );
    expect(outputs).not.toContain('PutKeyCommand');
  });

  it('rejects a bad prop at construction, naming it', () => {
    const other = new Stack(testApp(), 'Other');
    expect(
      () =>
        new CampaignReportExporter(other, 'Reports', {
          ...props,
          // @ts-expect-error the compiler rejects a string where the props take a number
          reportBatchSize: 'five',
        }),
    ).toThrow(/prop "reportBatchSize"/);
    expect(() => new CampaignReportExporter(other, 'Reports2', { ...props, stage: 'Prod' })).toThrow(
      /prop "stage"/,
    );
  });
});
