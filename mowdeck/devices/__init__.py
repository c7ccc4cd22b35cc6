"""What Fleet and the gateway both know of devices: the endpoint policy, shared by both."""
