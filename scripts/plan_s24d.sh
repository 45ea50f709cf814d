#!/usr/bin/env bash
# Session 24, frozen in the commit that added it, before it ran: plan_s24c's steps unchanged on another host (ask
# nvidia-h100-x2), with the session's last device minutes: two more boards for the transformer's replay pair with the
# noisy-group rule, one more for ResNet-50's. Archives as plan_s24c's.
#   OUT=/dir scripts/plan_s24d.sh
exec "$(dirname "$0")/plan_s24c.sh"
