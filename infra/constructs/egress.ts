import { RemovalPolicy } from 'aws-cdk-lib';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as logs from 'aws-cdk-lib/aws-logs';
import { Construct } from 'constructs';

export interface FixedEgressProps {
  /** Retention of the VPC flow logs, in days. */
  readonly flowLogRetentionDays: number;
  /**
   * An existing Elastic IP (its allocation id) for the NAT gateway instead of a new one: the
   * address the API provider allowlisted survives a deleted and redeployed stack.
   */
  readonly eipAllocationId?: string | undefined;
}

/**
 * A fixed egress IP for API keys restricted by IP (spec 5.3): a VPC with one public and one
 * private subnet, one NAT gateway with an Elastic IP the stack outputs. The API functions run
 * in the private subnet; S3 traffic takes a gateway endpoint (free) instead of the NAT. The
 * Elastic IP is retained when the stack is deleted, or an existing one is given.
 */
export class FixedEgress extends Construct {
  readonly vpc: ec2.Vpc;
  readonly subnets: ec2.SubnetSelection = { subnetType: ec2.SubnetType.PRIVATE_WITH_EGRESS };
  /** The Elastic IP this construct allocated; undefined for a given allocation id. */
  readonly elasticIp: ec2.CfnEIP | undefined;
  readonly allocationId: string;
  /** The public IP, when CloudFormation knows it (not for a given allocation id). */
  readonly publicIp: string | undefined;

  constructor(scope: Construct, id: string, props: FixedEgressProps) {
    super(scope, id);
    if (props.eipAllocationId === undefined) {
      const eip = new ec2.CfnEIP(this, 'EgressIp', {
        domain: 'vpc',
        tags: [{ key: 'Name', value: 'campaign-report-exporter egress' }],
      });
      // The API provider's allowlist holds this address: a deleted stack must not release it.
      eip.applyRemovalPolicy(RemovalPolicy.RETAIN);
      this.elasticIp = eip;
      this.allocationId = eip.attrAllocationId;
      this.publicIp = eip.attrPublicIp;
    } else {
      this.elasticIp = undefined;
      this.allocationId = props.eipAllocationId;
      this.publicIp = undefined;
    }
    const flowLogGroup = new logs.LogGroup(this, 'FlowLogs', {
      retention: props.flowLogRetentionDays as logs.RetentionDays,
    });
    this.vpc = new ec2.Vpc(this, 'Vpc', {
      maxAzs: 1,
      natGateways: 1,
      natGatewayProvider: ec2.NatProvider.gateway({ eipAllocationIds: [this.allocationId] }),
      subnetConfiguration: [
        { name: 'public', subnetType: ec2.SubnetType.PUBLIC, cidrMask: 24 },
        { name: 'private', subnetType: ec2.SubnetType.PRIVATE_WITH_EGRESS, cidrMask: 24 },
      ],
      gatewayEndpoints: { S3: { service: ec2.GatewayVpcEndpointAwsService.S3 } },
      flowLogs: {
        all: {
          destination: ec2.FlowLogDestination.toCloudWatchLogs(flowLogGroup),
          trafficType: ec2.FlowLogTrafficType.ALL,
        },
      },
      // Nothing uses the default security group (each function gets its own); restricting it
      // would add a custom-resource Lambda to the stack for no gain.
      restrictDefaultSecurityGroup: false,
    });
  }
}
