/**
 * The request budget's table, in a stack of its own: on-demand, the key schema the store and
 * the local DynamoDB of the tests use, removed with the stack, and a grant of the two item
 * operations on this table only; cdk-nag acknowledged with reasons.
 */
import { App, Stack, Validations } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import * as iam from 'aws-cdk-lib/aws-iam';
import { AwsSolutionsChecks } from 'cdk-nag';
import type { IConstruct } from 'constructs';
import { describe, expect, it } from 'vitest';
import { REQUEST_BUDGET_ACTIONS, RequestBudget } from '../../infra/constructs/request-budget.js';
import { REQUEST_BUDGET_TABLE_KEY } from '../../shared/aws/request-budget-table.js';
import { logicalIdOf, resourcesOf, type Statement } from './helpers.js';

function budgetStack() {
  const app = new App();
  const stack = new Stack(app, 'BudgetTest');
  const budget = new RequestBudget(stack, 'RequestBudget');
  const role = new iam.Role(stack, 'Consumer', {
    assumedBy: new iam.ServicePrincipal('lambda.amazonaws.com'),
  });
  budget.grantUse(role);
  return { app, stack, budget, template: Template.fromStack(stack) };
}

const findings = (scope: IConstruct) =>
  new AwsSolutionsChecks().validateScope(scope).violations.map((v) => v.ruleName);

describe('RequestBudget', () => {
  it('is an on-demand table with the key schema of the store, removed with the stack', () => {
    const { template } = budgetStack();

    template.hasResource('AWS::DynamoDB::Table', {
      DeletionPolicy: 'Delete',
      Properties: {
        BillingMode: 'PAY_PER_REQUEST',
        KeySchema: [{ AttributeName: REQUEST_BUDGET_TABLE_KEY.name, KeyType: 'HASH' }],
        AttributeDefinitions: [
          { AttributeName: REQUEST_BUDGET_TABLE_KEY.name, AttributeType: REQUEST_BUDGET_TABLE_KEY.type },
        ],
      },
    });
  });

  it('grants GetItem and PutItem on this table only', () => {
    const { template } = budgetStack();
    const tableId = logicalIdOf(template, 'AWS::DynamoDB::Table', 'RequestBudget');

    const statements = Object.values(resourcesOf(template, 'AWS::IAM::Policy')).flatMap(
      (p) => (p.Properties.PolicyDocument as { Statement: Statement[] }).Statement,
    );

    expect(statements).toEqual([
      {
        Effect: 'Allow',
        Action: [...REQUEST_BUDGET_ACTIONS],
        Resource: { 'Fn::GetAtt': [tableId, 'Arn'] },
      },
    ]);
  });

  it('has no unacknowledged cdk-nag finding, and acknowledges point-in-time recovery with a reason', () => {
    const { app, budget } = budgetStack();
    app.synth();
    const acknowledged = budget.table.node.metadata
      .filter((m) => m.type === Validations.ACKNOWLEDGED_RULES_METADATA_KEY)
      .flatMap((m) => Object.entries(m.data as Record<string, string>));

    expect(findings(app)).toEqual([]);
    // The one rule a table without backups fires (checked on a plain table: AwsSolutions-DDB3).
    expect(acknowledged.map(([id]) => id.replace(/^Annotation::/, ''))).toEqual(['AwsSolutions-DDB3']);
    for (const [id, reason] of acknowledged) expect(reason.length, id).toBeGreaterThan(40);
  });
});
