"""`python -m tests.fakes.kube --port N --state FILE.yaml [--kubeconfig OUT]`: the fake as a process."""

from tests.fakes.kube.server import main

if __name__ == "__main__":
    main()
