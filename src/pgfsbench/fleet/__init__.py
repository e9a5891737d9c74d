"""One spec on many hosts through Ansible (ansible-runner), results in one store."""
