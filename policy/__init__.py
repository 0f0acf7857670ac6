"""The admission rules as a Pulumi CrossGuard policy pack: `pulumi preview --policy-pack policy`."""
