import { CfnOutput, Stack, Validations } from 'aws-cdk-lib';
import type * as iam from 'aws-cdk-lib/aws-iam';
import * as secretsmanager from 'aws-cdk-lib/aws-secretsmanager';
import { Construct } from 'constructs';

export interface ApiKeySecretProps {
  /** Import this existing secret by name instead of creating one. */
  readonly existingSecretName?: string | undefined;
  /** Import this existing secret by ARN instead of creating one. */
  readonly existingSecretArn?: string | undefined;
}

/** A complete secret ARN ends with the 6 random characters Secrets Manager appends. */
const COMPLETE_ARN = /:secret:.+-[A-Za-z0-9]{6}$/;

/**
 * The Integration API key. Created empty (no value, no generated password): the key comes
 * from the account manager and is put by a person, as the description says. Or an existing
 * secret, imported by name or ARN. The secret holds the key alone, as plain text.
 */
export class ApiKeySecret extends Construct {
  readonly secret: secretsmanager.ISecret;
  /** What the handlers get as API_KEY_SECRET_ID: the ARN, or the name of a secret imported by name. */
  readonly secretId: string;
  /** Whether this stack created the secret. */
  readonly created: boolean;

  constructor(scope: Construct, id: string, props: ApiKeySecretProps = {}) {
    super(scope, id);
    if (props.existingSecretArn !== undefined) {
      this.secret = COMPLETE_ARN.test(props.existingSecretArn)
        ? secretsmanager.Secret.fromSecretCompleteArn(this, 'Imported', props.existingSecretArn)
        : secretsmanager.Secret.fromSecretPartialArn(this, 'Imported', props.existingSecretArn);
      this.secretId = props.existingSecretArn;
      this.created = false;
    } else if (props.existingSecretName !== undefined) {
      this.secret = secretsmanager.Secret.fromSecretNameV2(this, 'Imported', props.existingSecretName);
      // GetSecretValue resolves a name; the ARN of a name import lacks its random suffix.
      this.secretId = props.existingSecretName;
      this.created = false;
    } else {
      const name = `${Stack.of(this).stackName}/integration-api-key`;
      const secret = new secretsmanager.Secret(this, 'Secret', {
        secretName: name,
        description:
          'Integration API key of campaign-report-exporter, created empty. Put the key (plain text, ' +
          `the key alone) with: aws secretsmanager put-secret-value --secret-id ${name} --secret-string '<key>'. ` +
          'Rotate by putting the new key the same way; the functions re-read it on a 401.',
      });
      // Neither SecretString nor GenerateSecretString: CloudFormation creates the secret
      // without a value instead of a random password nobody could use.
      (secret.node.defaultChild as secretsmanager.CfnSecret).addPropertyDeletionOverride(
        'GenerateSecretString',
      );
      Validations.of(secret).acknowledge({
        id: 'AwsSolutions-SMG4',
        reason:
          'The key is issued and rotated by the API provider (spec 5.2: no endpoint issues or rotates keys), so no rotation Lambda can rotate it; a person puts the new key and the functions re-read it on a 401.',
      });
      this.secret = secret;
      this.secretId = secret.secretArn;
      this.created = true;
      new CfnOutput(this, 'PutKeyCommand', {
        description: 'Put the Integration API key into the secret with this command',
        value: `aws secretsmanager put-secret-value --secret-id ${secret.secretArn} --secret-string '<key>'`,
      }).overrideLogicalId('PutKeyCommand'); // A plain name: the README points people to it.
    }
  }

  /** Lets a function read the key (GetSecretValue, DescribeSecret on this secret only). */
  grantRead(grantee: iam.IGrantable): void {
    this.secret.grantRead(grantee);
  }
}
