import { ArnFormat, Duration, RemovalPolicy, Stack } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as kms from 'aws-cdk-lib/aws-kms';
import * as sns from 'aws-cdk-lib/aws-sns';
import * as subscriptions from 'aws-cdk-lib/aws-sns-subscriptions';
import type { Construct } from 'constructs';

export interface AlarmTopicProps {
  /** Names the topic and its key, so that two stages' e-mails tell which one alarms. */
  readonly serviceName: string;
  readonly alarmEmail?: string | undefined;
}

/**
 * Adds the alarm topic to `scope` (its own resources, so their logical ids stay those of the
 * monitoring construct): encrypted with a customer managed key, TLS only, optionally mailed.
 * CloudWatch may publish to it, and use its key, on behalf of this account's alarms only.
 */
export function addAlarmTopic(scope: Construct, props: AlarmTopicProps): sns.Topic {
  const stack = Stack.of(scope);
  const cloudWatch = new iam.ServicePrincipal('cloudwatch.amazonaws.com');
  // The confused-deputy guard: CloudWatch acts here for alarms of this account and region only.
  const forOwnAlarms = {
    StringEquals: { 'aws:SourceAccount': stack.account },
    ArnLike: {
      'aws:SourceArn': stack.formatArn({
        service: 'cloudwatch',
        resource: 'alarm',
        resourceName: '*',
        arnFormat: ArnFormat.COLON_RESOURCE_NAME,
      }),
    },
  };

  // CloudWatch can publish to an encrypted topic only with a customer managed key it may use.
  const key = new kms.Key(scope, 'TopicKey', {
    description: `Encrypts the ${props.serviceName} alarm topic`,
    enableKeyRotation: true,
    // It protects alarm notifications in transit only: nothing stays encrypted under it.
    removalPolicy: RemovalPolicy.DESTROY,
    pendingWindow: Duration.days(7),
  });
  key.addToResourcePolicy(
    new iam.PolicyStatement({
      sid: 'CloudWatchAlarmsPublish',
      principals: [cloudWatch],
      actions: ['kms:Decrypt', 'kms:GenerateDataKey*'],
      resources: ['*'],
      conditions: forOwnAlarms,
    }),
  );
  const topic = new sns.Topic(scope, 'AlarmTopic', {
    displayName: `${props.serviceName} alarms`,
    masterKey: key,
    enforceSSL: true,
  });
  // enforceSSL gives the topic a policy of its own, which replaces SNS's default policy (the one
  // that lets the account's services publish): without this Allow no alarm could notify anyone.
  topic.addToResourcePolicy(
    new iam.PolicyStatement({
      sid: 'CloudWatchAlarmsPublish',
      principals: [cloudWatch],
      actions: ['sns:Publish'],
      resources: [topic.topicArn],
      conditions: forOwnAlarms,
    }),
  );
  if (props.alarmEmail !== undefined) {
    topic.addSubscription(new subscriptions.EmailSubscription(props.alarmEmail));
  }
  return topic;
}
