import { RemovalPolicy, Stack, Validations } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as secretsmanager from 'aws-cdk-lib/aws-secretsmanager';
import { Construct } from 'constructs';

export interface ApiKeySecretProps {
  /** The name of the secret this construct creates (infra/naming.ts). */
  readonly secretName: string;
  /** Import this existing secret by name instead of creating one. */
  readonly existingSecretName?: string | undefined;
  /** Import this existing secret by ARN instead of creating one. */
  readonly existingSecretArn?: string | undefined;
  /** The customer managed KMS key the imported secret is encrypted with. */
  readonly existingSecretKmsKeyArn?: string | undefined;
}

/**
 * A complete secret ARN ends with `-` and the 6 random characters Secrets Manager appends; a
 * partial ARN whose name happens to end that way (`…:secret:acme/api-secret`) looks the same.
 */
const MAYBE_COMPLETE_ARN = /:secret:.+-[A-Za-z0-9]{6}$/;

/**
 * The command that puts the key: read from a file (then deleted) or from stdin, never given on
 * the command line, where it would stay in the shell's history and in the process list.
 */
export const putKeyCommand = (secretId: string): string =>
  `aws secretsmanager put-secret-value --secret-id ${secretId} --secret-string file://key.txt`;

/**
 * The Integration API key. Created empty (no value, no generated password): the key comes
 * from the account manager and is put by a person, as the description says. Or an existing
 * secret, imported by name or ARN. The secret holds the key alone, as plain text.
 */
export class ApiKeySecret extends Construct {
  readonly secret: secretsmanager.ISecret;
  /** What the handlers get as API_KEY_SECRET_ID: the ARN, or the name of a secret imported by name. */
  readonly secretId: string;
  /** Whether this construct created the secret. */
  readonly created: boolean;
  /** For a created secret: the command that puts the key (an output of the app's stack). */
  readonly putKeyCommand: string | undefined;
  readonly #kmsKeyArn: string | undefined;
  /** An imported ARN that may be complete or partial: read grants cover both readings. */
  readonly #ambiguousArn: string | undefined;

  constructor(scope: Construct, id: string, props: ApiKeySecretProps) {
    super(scope, id);
    this.#kmsKeyArn = props.existingSecretKmsKeyArn;
    if (props.existingSecretArn !== undefined) {
      const maybeComplete = MAYBE_COMPLETE_ARN.test(props.existingSecretArn);
      this.secret = maybeComplete
        ? secretsmanager.Secret.fromSecretCompleteArn(this, 'Imported', props.existingSecretArn)
        : secretsmanager.Secret.fromSecretPartialArn(this, 'Imported', props.existingSecretArn);
      this.#ambiguousArn = maybeComplete ? props.existingSecretArn : undefined;
      this.secretId = props.existingSecretArn;
      this.created = false;
    } else if (props.existingSecretName !== undefined) {
      this.secret = secretsmanager.Secret.fromSecretNameV2(this, 'Imported', props.existingSecretName);
      // GetSecretValue resolves a name; the ARN of a name import lacks its random suffix.
      this.secretId = props.existingSecretName;
      this.created = false;
    } else {
      const name = props.secretName;
      const secret = new secretsmanager.Secret(this, 'Secret', {
        secretName: name,
        description:
          'Integration API key of campaign-report-exporter, created empty. Put the key (plain text, ' +
          `the key alone) from a file, then delete the file: ${putKeyCommand(name)}. ` +
          'Rotate by putting the new key the same way; the functions re-read it on a 401.',
        // A person put the key: deleting the stack keeps it (deploy again with existingSecretName).
        removalPolicy: RemovalPolicy.RETAIN,
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
      this.putKeyCommand = putKeyCommand(secret.secretArn);
    }
  }

  /**
   * Lets a function read the key (GetSecretValue, DescribeSecret on this secret only) and, for
   * an imported secret under a customer managed key, decrypt with that key through Secrets
   * Manager only.
   */
  grantRead(grantee: iam.IGrantable): void {
    this.secret.grantRead(grantee);
    if (this.#ambiguousArn !== undefined) {
      // Nothing tells a complete ARN from a partial one whose name ends in `-` and six letters or
      // digits: grant the partial reading too (the name plus any suffix), as a partial import would.
      grantee.grantPrincipal.addToPrincipalPolicy(
        new iam.PolicyStatement({
          sid: 'ApiKeySecretIfPartialArn',
          actions: ['secretsmanager:GetSecretValue', 'secretsmanager:DescribeSecret'],
          resources: [`${this.#ambiguousArn}-??????`],
        }),
      );
    }
    if (this.#kmsKeyArn === undefined) return;
    grantee.grantPrincipal.addToPrincipalPolicy(
      new iam.PolicyStatement({
        sid: 'ApiKeySecretDecrypt',
        actions: ['kms:Decrypt'],
        resources: [this.#kmsKeyArn],
        conditions: {
          StringEquals: { 'kms:ViaService': `secretsmanager.${Stack.of(this).region}.amazonaws.com` },
        },
      }),
    );
  }
}
