"""Which Bash command lines restart or redeploy which services (pure functions)."""
from __future__ import annotations

import pytest

from plugins.cooldowns.commands import normalise_service, recognise
from plugins.cooldowns.options import parse_args, read_options
from plugins.cooldowns.shell import simple_commands, split_commands

R, D = "restart", "redeployment"


OTHER_LANGUAGE = "the commands another language runs (python -c, perl -e, …)"


def found(line: str, cwd: str | None = "/home/ops") -> list[tuple[str, str | None]]:
    return [(r.action, r.service) for r in recognise(line, cwd)]


@pytest.mark.parametrize("line, expected", [
    # docker and podman
    ("docker restart jellyfin", [(R, "jellyfin")]),
    ("docker container restart jellyfin", [(R, "jellyfin")]),
    ("docker restart -t 30 jellyfin sonarr", [(R, "jellyfin"), (R, "sonarr")]),
    ("docker restart --time=30 jellyfin", [(R, "jellyfin")]),
    ("docker -H ssh://nas restart Jellyfin", [(R, "jellyfin")]),
    ("docker --context nas container restart jellyfin", [(R, "jellyfin")]),
    ("docker start jellyfin", [(R, "jellyfin")]),
    ("docker stop jellyfin && docker start jellyfin", [(R, "jellyfin")]),
    ("/usr/bin/docker restart jellyfin", [(R, "jellyfin")]),
    ("podman restart jellyfin", [(R, "jellyfin")]),
    # docker compose (v2 and v1)
    ("docker compose restart jellyfin", [(R, "jellyfin")]),
    ("docker-compose restart jellyfin", [(R, "jellyfin")]),
    ("docker compose -f /opt/media/compose.yml restart -t 5 jellyfin", [(R, "jellyfin")]),
    ("docker compose start jellyfin", [(R, "jellyfin")]),
    ("docker compose up -d jellyfin", [(R, "jellyfin")]),
    ("docker compose up -d --force-recreate jellyfin", [(D, "jellyfin")]),
    ("docker compose up -d --build jellyfin", [(D, "jellyfin")]),
    ("docker compose up -d --pull always jellyfin", [(D, "jellyfin")]),
    ("docker compose up -d --pull missing jellyfin", [(R, "jellyfin")]),
    ("docker compose pull jellyfin && docker compose up -d jellyfin", [(D, "jellyfin")]),
    ("docker compose pull && docker compose up -d jellyfin", [(D, "jellyfin")]),
    ("docker compose pull sonarr && docker compose up -d jellyfin", [(R, "jellyfin")]),
    ("docker-compose build jellyfin; docker-compose up -d jellyfin", [(D, "jellyfin")]),
    # no service named: the project, named the way compose names it
    ("docker compose restart", [(R, "ops")]),
    ("cd /opt/Jelly.Fin && docker compose up -d --force-recreate", [(D, "jellyfin")]),
    ("docker compose -p media restart", [(R, "media")]),
    ("COMPOSE_PROJECT_NAME=media docker compose restart", [(R, "media")]),
    ("docker compose -f /opt/arr/docker-compose.yml up -d", [(R, "arr")]),
    ("docker compose --project-directory ../tv restart", [(R, "tv")]),
    # things that restart nothing
    ("docker compose up -d --no-start jellyfin", []),
    ("docker compose --dry-run restart jellyfin", []),
    ("docker compose down", []),
    ("docker compose pull jellyfin", []),
    ("docker compose logs -f jellyfin", []),
    ("docker ps -a", []),
    ("docker stop jellyfin", []),
    ("docker logs --tail 50 jellyfin", []),
    ("docker inspect jellyfin | grep restart", []),
    ("echo docker restart jellyfin", []),
    # asking for help runs nothing
    ("docker compose up --help", []),
    ("docker compose restart --help", []),
    ("docker compose start -h", []),
    ("kubectl rollout restart --help", []),
    ("kubectl rollout undo -h", []),
    ("systemctl -h restart nginx", []),
    # more verbs and spellings
    ("systemctl reload-or-try-restart nginx", [(R, "nginx")]),
    ("systemctl condreload nginx", [(R, "nginx")]),
    # systemctl's options that take a value, before the verb
    ("systemctl -C ops restart nginx", [(R, "nginx")]),
    ("systemctl --capsule ops try-restart nginx", [(R, "nginx")]),
    ("systemctl --legend no --message 'config fix' restart nginx", [(R, "nginx")]),
    ("systemctl --preset-mode full --image-policy root=verity restart nginx", [(R, "nginx")]),
    ("service nginx --full-restart", [(R, "nginx")]),
    ("kubectl -v 6 rollout restart deployment/web", [(R, "web")]),
    ("nerdctl restart jellyfin", [(R, "jellyfin")]),
    ("docker start -a jellyfin", [(R, "jellyfin")]),   # -a: attach, not all
    ("systemctl enable --now nginx", [(R, "nginx")]),
    ("systemctl enable nginx", []),
    ("/etc/init.d/nginx restart", [(R, "nginx")]),
    ("sudo /etc/init.d/nginx status", []),
    ("/etc/rc.d/init.d/sshd restart", [(R, "sshd")]),
    ("cd /etc/init.d && ./nginx restart", [(R, "nginx")]),
    ("cd /etc/init.d; sudo ./nginx force-reload", [(R, "nginx")]),
    ("cd /etc && init.d/nginx restart", [(R, "nginx")]),
    ("init.d/nginx restart", [(R, "nginx")]),
    ("cd /etc/rc2.d && ../init.d/nginx restart", [(R, "nginx")]),
    ("cd /etc/init.d && nginx restart", []),          # a bare name comes from PATH, not the directory
    ("cd /opt/app && ./nginx restart", []),
    ("invoke-rc.d nginx restart", [(R, "nginx")]),
    ("supervisorctl restart worker", [(R, "worker")]),
    ("supervisorctl status worker", []),
    ("supervisorctl restart celery:celery_00 celery:celery_01", [(R, "celery_00"), (R, "celery_01")]),
    ("supervisorctl start web:gunicorn", [(R, "gunicorn")]),
    ("k3s kubectl rollout restart deployment/web", [(R, "web")]),
    ("microk8s kubectl rollout restart deployment/web", [(R, "web")]),
    ("oc rollout restart deployment/web", [(R, "web")]),
    ("oc -n media rollout restart dc/jellyfin", [(R, "jellyfin")]),
    ("oc rollout undo deployment/web", [(D, "web")]),
    ("oc rollout status deployment/web", []),
    ("oc rollout latest dc/jellyfin", [(D, "jellyfin")]),
    ("oc -n media rollout latest deploymentconfig jellyfin", [(D, "jellyfin")]),
    ("oc rollout retry dc/jellyfin", [(D, "jellyfin")]),
    ("kubectl rollout latest deployment/web", []),   # oc's alone: kubectl has no such command
    ("oc get pods -n media", []),
    ("grep -r 'docker restart' /etc", []),
    ("git status", []),
    ("", []),
    # systemd, SysV, OpenRC
    ("systemctl restart nginx", [(R, "nginx")]),
    ("systemctl restart nginx.service", [(R, "nginx")]),
    ("systemctl --user restart syncthing", [(R, "syncthing")]),
    ("systemctl -H nas restart smbd nmbd", [(R, "smbd"), (R, "nmbd")]),
    ("systemctl try-restart nginx", [(R, "nginx")]),
    ("systemctl reload-or-restart nginx", [(R, "nginx")]),
    ("systemctl start getty@tty1.service", [(R, "getty@tty1")]),
    ("systemctl status nginx", []),
    ("systemctl reload nginx", []),
    ("systemctl stop nginx", []),
    ("systemctl is-active nginx", []),
    ("service nginx restart", [(R, "nginx")]),
    ("service nginx status", []),
    ("rc-service nginx restart", [(R, "nginx")]),
    # kubectl
    ("kubectl rollout restart deployment/web", [(R, "web")]),
    ("kubectl -n media rollout restart deployment jellyfin sonarr", [(R, "jellyfin"), (R, "sonarr")]),
    ("kubectl rollout undo deploy/web", [(D, "web")]),
    ("kubectl rollout status deployment/web", []),
    ("kubectl get pods", []),
    # ansible
    ("ansible-playbook -i inventory site.yml --limit jellyfin", [(D, "jellyfin")]),
    ("ansible-playbook site.yml -l web1,web2", [(D, "web1"), (D, "web2")]),
    ("ansible-playbook site.yml --limit 'web1:!web3'", [(D, "web1")]),
    ("ansible-playbook -i inv playbooks/jellyfin.yml -e version=10.9", [(D, "jellyfin")]),
    ("ansible-playbook site.yml --limit jellyfin --check", []),
    ("ansible-playbook site.yml --syntax-check", []),
    ("ansible-playbook site.yml --list-hosts", []),
    ("ansible jellyfin -m ping", []),
    # helm
    ("helm upgrade jellyfin ./chart", [(D, "jellyfin")]),
    ("helm upgrade --install -n media --set image.tag=10.9 jellyfin jellyfin/jellyfin", [(D, "jellyfin")]),
    ("helm upgrade -f values.yaml --namespace media jellyfin ./chart --wait", [(D, "jellyfin")]),
    ("helm install jellyfin ./chart", [(D, "jellyfin")]),
    ("helm rollback jellyfin 3", [(D, "jellyfin")]),
    ("helm upgrade jellyfin ./chart --dry-run", []),
    ("helm upgrade jellyfin ./chart --dry-run=server", []),
    ("helm list -n media", []),
    ("helm status jellyfin", []),
    # guests restarted whole: Proxmox containers and VMs, libvirt domains
    ("pct reboot 101", [(R, "101")]),
    ("pct stop 101 && pct start 101", [(R, "101")]),
    ("qm reboot 100 --timeout 60", [(R, "100")]),
    ("qm reset 100 --skiplock 1", [(R, "100")]),
    ("qm start --skiplock 1 100", [(R, "100")]),
    ("qm reboot -timeout 60 101", [(R, "101")]),
    ("pct start -debug 1 101", [(R, "101")]),
    ("virsh 'reboot web'", [(R, "web")]),
    ("virsh -c qemu:///system 'start web; reboot db'", [(R, "web"), (R, "db")]),
    ("virsh 'list --all'", []),
    ("sudo /usr/sbin/qm start 100", [(R, "100")]),
    ("ssh pve 'pct reboot 105'", [(R, "105")]),
    ("virsh reboot web", [(R, "web")]),
    ("virsh -c qemu:///system start --domain db", [(R, "db")]),
    ("virsh --connect qemu:///system reset Web --mode acpi", [(R, "web")]),
    ("pct exec 101 -- systemctl restart nginx", [(R, "nginx")]),
    ("qm status 100", []),
    ("qm shutdown 100", []),
    ("pct resume 101", []),
    ("pct list", []),
    ("virsh list --all", []),
    ("virsh shutdown web", []),
    # instances restarted whole: LXD and Incus, Multipass, Vagrant
    ("lxc restart web", [(R, "web")]),
    ("lxc restart local:web db --timeout 30", [(R, "web"), (R, "db")]),
    ("lxc --project prod restart -f Web", [(R, "web")]),
    ("incus start web", [(R, "web")]),
    ("incus restart --console=vga web", [(R, "web")]),
    ("incus stop web && incus start web", [(R, "web")]),
    ("lxc exec web -- systemctl restart nginx", [(R, "nginx")]),
    ("lxc list", []),
    ("lxc stop web", []),
    ("incus restart", []),
    ("multipass restart", [(R, "primary")]),
    ("multipass start --timeout 300 vm1 vm2", [(R, "vm1"), (R, "vm2")]),
    ("multipass stop vm1", []),
    ("multipass list", []),
    ("vagrant reload web", [(R, "web")]),
    ("vagrant up db --provider virtualbox --provision-with shell", [(R, "db")]),
    ("vagrant reload", [(R, "ops")]),
    ("cd /srv/vms/buildbox && vagrant up", [(R, "buildbox")]),
    ("VAGRANT_CWD=/srv/lab vagrant reload --provision", [(R, "lab")]),
    ("cd /srv && VAGRANT_CWD=lab vagrant up", [(R, "lab")]),
    ("vagrant ssh web -c 'sudo systemctl restart nginx'", [(R, "nginx")]),
    ("vagrant halt web", []),
    ("lxd.lxc restart --project=prod web", [(R, "web")]),
    ("vagrant up --provider=libvirt db", [(R, "db")]),
    ("vagrant reload db1", [(R, "db1")]),
    ("export VAGRANT_CWD=/srv/lab; vagrant up", [(R, "lab")]),
    ("VAGRANT_CWD=~/lab vagrant reload", [(R, "lab")]),
    ("vagrant ssh web --command 'echo hi' -c 'systemctl restart nginx'", [(R, "nginx")]),
    ("docker compose -p media --project-name other restart", [(R, "other")]),
    ("vagrant status", []),
])
def test_recognises(line, expected):
    assert found(line) == expected


@pytest.mark.parametrize("line, expected", [
    # prefixes
    ("sudo docker restart jellyfin", [(R, "jellyfin")]),
    ("sudo -u root -E docker restart jellyfin", [(R, "jellyfin")]),
    ("sudo -n systemctl restart nginx", [(R, "nginx")]),
    ("doas systemctl restart nginx", [(R, "nginx")]),
    ("DOCKER_HOST=ssh://nas docker restart jellyfin", [(R, "jellyfin")]),
    ("env DOCKER_HOST=ssh://nas docker restart jellyfin", [(R, "jellyfin")]),
    ("timeout 60 docker restart jellyfin", [(R, "jellyfin")]),
    ("timeout -s KILL 60 sudo docker restart jellyfin", [(R, "jellyfin")]),
    ("nohup docker restart jellyfin &", [(R, "jellyfin")]),
    ("time docker restart jellyfin", [(R, "jellyfin")]),
    ("nice -n 10 docker restart jellyfin", [(R, "jellyfin")]),
    # chains, pipes, redirections, subshells, newlines
    ("docker restart jellyfin && sleep 60 && curl -f http://jellyfin:8096/health",
     [(R, "jellyfin")]),
    ("docker restart jellyfin; systemctl restart nginx", [(R, "jellyfin"), (R, "nginx")]),
    ("docker restart jellyfin || systemctl restart docker", [(R, "jellyfin"), (R, "docker")]),
    ("docker restart jellyfin 2>&1 | tail -5", [(R, "jellyfin")]),
    ("docker restart jellyfin >/tmp/out.log 2>/dev/null", [(R, "jellyfin")]),
    ("(cd /opt/media && docker compose restart jellyfin)", [(R, "jellyfin")]),
    ("docker restart jellyfin\nsystemctl restart nginx", [(R, "jellyfin"), (R, "nginx")]),
    ("docker restart \\\n  jellyfin", [(R, "jellyfin")]),
    ("if ! curl -fs http://jf/health; then docker restart jellyfin; fi", [(R, "jellyfin")]),
    ("docker restart jellyfin # and again: docker restart sonarr", [(R, "jellyfin")]),
    ("# restart it\ndocker ps # check first\ndocker restart jellyfin", [(R, "jellyfin")]),
    ("echo '#not a comment' && docker restart jellyfin", [(R, "jellyfin")]),
    ("echo done\\", []),
    # one restart per service and call, however it is spelt
    ("docker restart jellyfin && docker restart jellyfin", [(R, "jellyfin")]),
    ("docker restart jellyfin && docker compose up -d --force-recreate jellyfin",
     [(R, "jellyfin"), (D, "jellyfin")]),
    # wrapped command lines
    ("bash -c 'docker restart jellyfin'", [(R, "jellyfin")]),
    ("sh -lc \"docker restart jellyfin; systemctl restart nginx\"", [(R, "jellyfin"), (R, "nginx")]),
    ("sudo bash -c 'cd /opt/media && docker compose up -d --force-recreate'", [(D, "media")]),
    ("ssh nas 'docker restart jellyfin'", [(R, "jellyfin")]),
    ("ssh -p 2222 -i ~/.ssh/id ops@nas sudo systemctl restart smbd", [(R, "smbd")]),
    ("ssh nas 'cd /opt/arr && docker compose restart'", [(R, "arr")]),
    ("su -c 'systemctl restart nginx' root", [(R, "nginx")]),
    ("eval docker restart jellyfin", [(R, "jellyfin")]),
    ("ssh nas uptime", []),
    # OpenSSH reads options after the destination too
    ("ssh nas -t 'sudo systemctl restart nginx'", [(R, "nginx")]),
    ("ssh nas -p 2222 systemctl restart nginx", [(R, "nginx")]),
    ("ssh nas ls -l", []),
    # more prefixes that run the rest as a command; sudo -l runs none
    ("setsid systemctl restart nginx", [(R, "nginx")]),
    ("runuser -u root -- systemctl restart nginx", [(R, "nginx")]),
    # su's command in a cluster, glued to -c, or as --session-command; runuser written as su is
    ("su -lc 'systemctl restart nginx'", [(R, "nginx")]),
    ("su -c'docker restart jellyfin' root", [(R, "jellyfin")]),
    ("su --session-command='systemctl restart nginx'", [(R, "nginx")]),
    # su runs the last command it is given, whichever way each is spelt
    ("su --command 'echo hi' -c 'docker restart jellyfin' root", [(R, "jellyfin")]),
    ("su -c 'docker restart jellyfin' --command 'echo hi' root", []),
    ("runuser -l ops -c 'docker restart jellyfin'", [(R, "jellyfin")]),
    ("runuser ops", []),
    ("su ops -- -c 'docker restart jellyfin'", [(R, "jellyfin")]),
    ("su - ops -- -c 'systemctl restart nginx'", [(R, "nginx")]),
    ("pkexec --user root systemctl restart nginx", [(R, "nginx")]),
    ("sudo -l systemctl restart nginx", []),
    ("sudo -U ops -l docker restart jellyfin", []),
    ("sudo -il docker restart jellyfin", []),
    ("sudo -ulucas docker restart jellyfin", [(R, "jellyfin")]),   # the l is in -u's value
    ("docker ps -q | xargs docker inspect", []),
    ("bash ./check.sh", []),
    # systemd-run runs the command it is given, now or (--on-*) later
    ("systemd-run systemctl restart nginx", [(R, "nginx")]),
    ("systemd-run --unit=fix-nginx -p After=network.target systemctl restart nginx", [(R, "nginx")]),
    ("sudo systemd-run -u fix -q --wait -- docker restart jellyfin", [(R, "jellyfin")]),
    ("systemd-run --scope --user -E LANG=C systemctl --user restart syncthing", [(R, "syncthing")]),
    ("systemd-run --property Nice=5 --on-active 30 systemctl restart nginx", [(R, "nginx")]),
    ("systemd-run --on-active=5min -qu later docker restart jellyfin", [(R, "jellyfin")]),
    ("systemd-run -p MemoryMax=1G journalctl -u nginx", []),
    # at and batch run later what they are fed, as a shell would; a script file we cannot see
    ("echo 'systemctl restart nginx' | at now + 5 minutes", [(R, "nginx")]),
    ("at 03:00 <<< 'docker restart jellyfin'", [(R, "jellyfin")]),
    ("printf 'docker restart %s\\n' jellyfin sonarr | batch", [(R, "jellyfin"), (R, "sonarr")]),
    ("sudo at -q b -m now <<EOF\nsystemctl restart nginx\nEOF", [(R, "nginx")]),
    ("at -f /srv/restart-nginx.sh now", []),
    ("at -l", []),
    ("at -c 12 | grep systemctl", []),
    ("echo 'systemctl status nginx' | at now", []),
    # How a command in a container reaches the host, or another root, and other wrappers
    ("nsenter -t 1 -m -u -i -n -- systemctl restart nginx", [(R, "nginx")]),
    ("nsenter --target 1 --mount=/proc/1/ns/mnt -S 0 systemctl restart nginx", [(R, "nginx")]),
    ("chroot /host systemctl restart nginx", [(R, "nginx")]),
    ("chroot --userspec root:root /host docker restart jellyfin", [(R, "jellyfin")]),
    ("chroot /host", []),
    ("unshare -m --propagation private systemctl restart nginx", [(R, "nginx")]),
    ("setpriv --reuid 0 --regid 0 --init-groups systemctl restart nginx", [(R, "nginx")]),
    ("busybox sh -c 'systemctl restart nginx'", [(R, "nginx")]),
    ("strace -f -o /tmp/trace systemctl restart nginx", [(R, "nginx")]),
    ("ltrace -e malloc docker restart jellyfin", [(R, "jellyfin")]),
    ("ltrace -w 3 docker restart jellyfin", [(R, "jellyfin")]),
    ("strace -c -U name,calls systemctl restart nginx", [(R, "nginx")]),
    ("unshare --setgroups deny -r systemctl restart nginx", [(R, "nginx")]),
    ("taskset -c 0-1 docker restart jellyfin", [(R, "jellyfin")]),
    ("chrt -f 10 systemctl restart nginx", [(R, "nginx")]),
    ("prlimit --nofile=1024 systemctl restart nginx", [(R, "nginx")]),
    ("script -qc 'systemctl restart nginx' /dev/null", [(R, "nginx")]),
    ("script -q -c 'docker restart jellyfin' /dev/null", [(R, "jellyfin")]),
    ("script --command='docker restart jellyfin' session.log", [(R, "jellyfin")]),
    ("script -q session.log", []),
    # a value glued to its option, alone or at the end of a cluster
    ("script -q -c'systemctl restart nginx' /dev/null", [(R, "nginx")]),
    ("script -qc'docker restart jellyfin' /dev/null", [(R, "jellyfin")]),
    # options after the file too, as GNU getopt reads them
    ("script /dev/null -qc 'docker restart jellyfin'", [(R, "jellyfin")]),
    ("script session.log --command 'systemctl restart nginx'", [(R, "nginx")]),
    # run0, systemd's sudo, runs its command as a transient service
    ("run0 systemctl restart nginx", [(R, "nginx")]),
    ("run0 --unit=fix -u root --setenv=LANG=C -- docker restart jellyfin", [(R, "jellyfin")]),
    ("run0 -D /srv --nice 5 docker restart jellyfin", [(R, "jellyfin")]),
    ("run0 journalctl -u nginx", []),
    # watch runs its command over and over: its words through sh -c, or with -x as they are
    ("watch -n 5 systemctl restart nginx", [(R, "nginx")]),
    ("watch 'docker restart jellyfin'", [(R, "jellyfin")]),
    ("watch -n5 -d 'docker ps; systemctl restart nginx'", [(R, "nginx")]),
    ("watch -x sh -c 'systemctl restart nginx'", [(R, "nginx")]),
    ("watch docker ps", []),
    ("watch -n 1 'systemctl status nginx'", []),
    # find runs what -exec, -execdir, -ok and -okdir name, up to a ; or a {} +
    ("find /etc/nginx -newer /tmp/stamp -exec systemctl restart nginx \\;", [(R, "nginx")]),
    ("find . -name '*.yml' -exec grep -q image {} ';' -exec docker restart jellyfin \\;", [(R, "jellyfin")]),
    ("sudo find /srv -name x -ok sudo systemctl restart nginx \\; 2>/dev/null", [(R, "nginx")]),
    ("find . -name '*.log' -exec rm {} \\;", []),
    ("find . -name '*.log' -exec rm {} + -exec echo systemctl restart nginx {} +", []),
    ("find / -name docker -print", []),
    # GNU parallel runs its command with each argument, or its arguments as commands
    ("parallel docker restart ::: jellyfin sonarr", [(R, "jellyfin"), (R, "sonarr")]),
    ("parallel -j 4 --delay=1 'systemctl restart {}' ::: nginx smbd", [(R, "nginx"), (R, "smbd")]),
    ("parallel ::: 'docker restart jellyfin' 'uptime'", [(R, "jellyfin")]),
    ("parallel docker compose restart ::: jellyfin ::: sonarr", [(R, "jellyfin"), (R, "sonarr")]),
    ("parallel docker logs ::: jellyfin", []),
    ("cat commands.txt | parallel -j 2", []),
    # code another language runs, when it names no restart of a recognised program
    ("python3 -c 'import subprocess; print(subprocess.check_output([\"docker\", \"ps\"]))'", []),
    ("perl -ne 'print if /restart/' /var/log/syslog && docker ps", []),
    ("python3 -m pip install docker", []),
    ("python3 restart_report.py --service jellyfin", []),   # a script: not seen into (documented)
    # a command named at run time that does nothing like a restart, or names its program
    ("\"$(command -v docker)\" ps && $EDITOR notes.txt", []),
    ("docker logs $name && docker inspect ${id}", []),
    ("\"$VENV/bin/pip\" install -r requirements.txt && docker compose ps", []),
    ("${KUBECTL:-kubectl} rollout status deploy/web", []),
    ("${KUBECTL:-kubectl} rollout restart deployment/web", [(R, "web")]),
    ("minikube kubectl -- rollout restart deployment/web", [(R, "web")]),
    ("microk8s.kubectl rollout restart deployment/web", [(R, "web")]),
    # a script's words with a variable in them are no word spelt at run time
    ("docker exec web sh -c 'pip install -q requests && echo $HOME'", []),
    # a heredoc's code is what follows the interpreter, not the command feeding it
    ("kubectl logs web | python3 - <<'EOF'\nimport sys\nprint(sum('restart' in l for l in sys.stdin))\nEOF", []),
    # a quoted or escaped operator character is part of a word
    ("echo ';' docker restart jellyfin", []),
    ("echo \\; docker restart jellyfin", []),
    # an unbalanced quote: bash refuses that line, but the next line runs
    ("echo \"oops\ndocker restart jellyfin", [(R, "jellyfin")]),
])
def test_prefixes_chains_and_wrappers(line, expected):
    assert found(line) == expected


@pytest.mark.parametrize("line, expected", [
    # a substitution inside double quotes runs all the same
    ('out="$(docker restart jellyfin 2>&1)"; echo "$out"', [(R, "jellyfin")]),
    ('echo "`docker restart jellyfin`"', [(R, "jellyfin")]),
    ('echo "done: $(sudo systemctl restart nginx)"', [(R, "nginx")]),
    ('echo "$(echo "$(docker restart jellyfin)")"', [(R, "jellyfin")]),
    # shell options around -c
    ("bash -o pipefail -c 'docker restart jellyfin'", [(R, "jellyfin")]),
    ("bash -e -o pipefail -c 'docker restart jellyfin'", [(R, "jellyfin")]),
    ("bash -O extglob -c 'docker restart jellyfin'", [(R, "jellyfin")]),
    ("bash -c -- 'docker restart jellyfin'", [(R, "jellyfin")]),
    ("bash +o posix --norc -xc 'docker restart jellyfin'", [(R, "jellyfin")]),
    ("bash -o pipefail ./restart.sh", []),
    # short options run together
    ("sudo -iu root docker restart jellyfin", [(R, "jellyfin")]),
    ("sudo -Eu root docker restart jellyfin", [(R, "jellyfin")]),
    ("sudo -nu root systemctl restart nginx", [(R, "nginx")]),
    ("sudo -uroot docker restart jellyfin", [(R, "jellyfin")]),
    # time's options, flock's forms, ssh's end of options
    ("time -p docker restart jellyfin", [(R, "jellyfin")]),
    ("flock /tmp/l -c 'docker restart jellyfin'", [(R, "jellyfin")]),
    ("flock -w 5 /tmp/l docker restart jellyfin", [(R, "jellyfin")]),
    ("ssh nas -- docker restart jellyfin", [(R, "jellyfin")]),
    # a backslash-newline joins what it splits, as in bash
    ("docker restart jelly\\\nfin", [(R, "jellyfin")]),
    ("dock\\\ner restart jellyfin", [(R, "jellyfin")]),
    # a comment is not continued by a backslash; an escaped backslash continues nothing
    ("true # note \\\ndocker restart jellyfin", [(R, "jellyfin")]),
    ("echo done\\\\\ndocker restart jellyfin", [(R, "jellyfin")]),
    ("echo 'a\\\nb'; docker restart jellyfin", [(R, "jellyfin")]),
    ("bash -euo pipefail -c 'docker restart jellyfin'", [(R, "jellyfin")]),
    ("bash +euo posix -c 'docker restart jellyfin'", [(R, "jellyfin")]),
    # a substitution among a command's words: both run
    ("docker compose -f $(ls /opt/media/*.yml) up -d --force-recreate", [(D, None)]),
    ("docker compose --file /srv/media/compose.yml -f /srv/other/compose.yml restart", [(R, "media")]),
    ("docker restart $(docker ps -q --filter name=jellyfin) && systemctl restart nginx", [(R, None), (R, "nginx")]),
    ("echo $(date) && docker restart jellyfin", [(R, "jellyfin")]),
    ("x=$(echo $(docker restart jellyfin))", [(R, "jellyfin")]),
    # a quoted substitution among a wrapper's own words runs here
    ("bash -c 'echo \"$1\"' _ \"$(docker restart jellyfin)\"", [(R, "jellyfin")]),
    ('OUT="$(docker restart jellyfin)" bash -c "echo done"', [(R, "jellyfin")]),
    ('ssh -o "X=$(docker restart jellyfin)" host uptime', [(R, "jellyfin")]),
    # a continued line whose next line starts with # is no comment
    ("echo a\\\n#b; docker restart jellyfin", [(R, "jellyfin")]),
    # text right after a substitution is the same word
    ("docker compose -f $(pwd)/compose.yml up -d", [(R, None)]),
    ("docker compose --file=$(pwd)/compose.yml up -d", [(R, None)]),
    ("docker restart `echo jellyfin` && echo ok", [(R, None)]),
    ("docker restart x`echo y` && systemctl restart nginx", [(R, None), (R, "nginx")]),
    ("`which docker` ps; docker restart jellyfin", [(R, "jellyfin")]),
    # env's and sudo's other directory; env's lone -
    ("env -C /srv/jellyfin docker compose up -d", [(R, "jellyfin")]),
    ("sudo --chdir=/srv/jellyfin docker compose up -d", [(R, "jellyfin")]),
    ("env -C/srv/jellyfin docker compose up -d", [(R, "jellyfin")]),
    ("sudo -D/srv/jellyfin docker compose up -d", [(R, "jellyfin")]),
    ("sudo -iD/srv/jellyfin docker compose up -d", [(R, "jellyfin")]),
    ("env - docker restart jellyfin", [(R, "jellyfin")]),
    # env -S runs the words of its value, with any words after it
    ("env -S 'docker restart jellyfin'", [(R, "jellyfin")]),
    ("env -iS 'docker restart jellyfin'", [(R, "jellyfin")]),
    ("env --split-string='docker restart' jellyfin", [(R, "jellyfin")]),
    ("env '-Ssystemctl restart nginx'", [(R, "nginx")]),
    ("env -uS docker restart jellyfin", [(R, "jellyfin")]),   # -u's variable is S; then the command
    # a case pattern's ")" ends no subshell
    ("(cd /srv/jellyfin && case $y in a) docker compose up -d;; esac)", [(R, "jellyfin")]),
    # a substitution in a redirection's target runs; a process substitution after one is no target
    ('cat <<< "$(systemctl restart nginx)"', [(R, "nginx")]),
    ('echo done > "/tmp/$(docker restart jellyfin).log"', [(R, "jellyfin")]),
    ("cat < <(systemctl restart nginx)", [(R, "nginx")]),
    ("while read l; do echo $l; done < <(docker restart jellyfin)", [(R, "jellyfin")]),
    ("echo hi > >(systemctl restart nginx)", [(R, "nginx")]),
    ("echo hi > out.log 2>&1; docker restart jellyfin", [(R, "jellyfin")]),
    # a "#" in quotes within a quoted substitution, or after an escaped space, starts no comment
    ('echo "$(echo "a # b")"; systemctl restart nginx', [(R, "nginx")]),
    ("echo foo\\ #; systemctl restart nginx", [(R, "nginx")]),
    ('echo "$(date)" # systemctl restart nginx', []),
    # shell keywords that name something first
    ("function f { systemctl restart nginx; }; f", [(R, "nginx")]),
    ("coproc systemctl restart nginx", [(R, "nginx")]),
    ("coproc NAME { systemctl restart nginx; }", [(R, "nginx")]),
    # pushd moves as cd does; after popd the directory is not known
    ("pushd /srv/jellyfin && docker compose up -d", [(R, "jellyfin")]),
    ("cd /srv/jellyfin && popd && docker compose up -d", [(R, None)]),
    # a shell runs what echo or printf writes into its input, and a here-string
    ("echo 'systemctl restart nginx' | bash", [(R, "nginx")]),
    ("echo systemctl restart nginx | sudo sh", [(R, "nginx")]),
    ("echo -e 'docker restart jellyfin' |& zsh -s", [(R, "jellyfin")]),
    ("printf 'docker restart jellyfin\\nsystemctl restart nginx\\n' | bash", [(R, "jellyfin"), (R, "nginx")]),
    ("printf 'systemctl restart %s\\n' nginx smbd | dash", [(R, "nginx"), (R, "smbd")]),
    ("bash <<< 'systemctl restart nginx'", [(R, "nginx")]),
    ('bash <<<"docker restart jellyfin"', [(R, "jellyfin")]),
    ("sh -s - <<< 'cd /srv/jellyfin && docker compose up -d'", [(R, "jellyfin")]),
    ("echo 'cd /opt/arr && docker compose restart' | ssh nas", [(R, "arr")]),
    # a heredoc's body is read as commands, into a shell too
    ("bash <<EOF\nsystemctl restart nginx\nEOF", [(R, "nginx")]),
    ("ssh nas <<'EOF'\ndocker restart jellyfin\nEOF", [(R, "jellyfin")]),
    # a heredoc's body ends at its delimiter: a quote or a parenthesis in it is text, which hides no command after it
    ("cat > notes.md <<'EOF'\nNginx wasn't reloading.\nEOF\nsystemctl restart nginx\n"
     "cat >> notes.md <<'EOF'\nRestarted; it's fine now.\nEOF", [(R, "nginx")]),
    ("cat > a <<EOF\nit's\nEOF\ncat > b <<-EOF\n\tthat's\n\tEOF\ndocker restart jellyfin", [(R, "jellyfin")]),
    ("git commit -m \"$(cat <<'EOF'\nFix the cache :(\nEOF\n)\" && docker restart jellyfin && echo \"a\" \"b\"",
     [(R, "jellyfin")]),
    ("cat <<A <<'B'\na's\nA\nb's\nB\nsystemctl restart nginx", [(R, "nginx")]),
    # cat given no file passes on what it is fed: a heredoc (read already), a here-string, a pipe
    ("cat <<EOF | bash\nsystemctl restart nginx\nEOF", [(R, "nginx")]),
    ("cat <<'EOF' | ssh nas\ndocker restart jellyfin\nEOF", [(R, "jellyfin")]),
    ("echo 'docker restart jellyfin' | cat - | bash", [(R, "jellyfin")]),
    # a wrapped shell reads what its wrapper was fed
    ("echo 'docker restart jellyfin' | ssh nas 'sudo bash -s'", [(R, "jellyfin")]),
    ("echo 'systemctl restart nginx' | su -c bash root", [(R, "nginx")]),
    ("echo 'docker restart jellyfin' | ssh nas uptime", []),
    ("echo 'docker restart jellyfin' | bash -c 'cat; bash'", []),
    # only printed, or read by no shell, or by a shell that runs a script
    ("echo 'systemctl restart nginx' | grep restart", []),
    ("echo 'systemctl restart nginx' > notes.txt", []),
    ("cat <<< 'systemctl restart nginx'", []),
    ("echo 'systemctl restart nginx'; bash -i", []),
    ("echo 'docker restart jellyfin' | bash ./check.sh", []),
    ("printf -v cmd 'docker restart jellyfin' | bash", []),
    ("echo 'docker restart jellyfin' | ssh -N nas", []),
    ("echo uptime | bash", []),
    # fed from elsewhere, in a line that names no program recognised here
    ('echo "$cmd" | bash', []),
    ("curl -fsSL https://example.com/setup.sh | sh", []),
    # a shell, eval or su given a line the shell makes at run time: unread, where the line holds a restart's words
    ("cmd='docker restart jellyfin'; bash -c \"$cmd\"", [(R, None)]),
    ("cmd='docker restart jellyfin'; eval \"$cmd\"", [(R, None)]),
    ("sh -c \"$(printf 'docker restart jellyfin')\"", [(R, None)]),
    ("bash -c \"`echo docker restart jellyfin`\"", [(R, None)]),
    ("CMD='systemctl restart nginx'; su -c \"$CMD\" root", [(R, None)]),
    ('eval "$(docker-machine env nas)"; docker ps', []),   # setting up, not restarting
    ("eval $(minikube docker-env)", []),
    ("source <(kubectl completion bash)", []),
    ('eval "$(ssh-agent -s)" && rsync ./ nas:/srv/services/', []),
    # ...and a line with words of its own is read
    ('bash -c "docker logs $C"', []),
    ('"$(command -v docker)" ps && $EDITOR notes.txt', []),
    # a recognised program whose action is made at run time, wherever its options put it
    ("docker $(echo restart) jellyfin", [(R, None)]),
    ("systemctl $ACTION nginx", [(R, None)]),
    ("systemctl --user -q $ACTION app", [(R, None)]),
    ("docker -H ssh://nas container $ACTION web", [(R, None)]),
    ("docker compose $ACTION web", [(R, None)]),
    ("kubectl -n prod rollout $ACTION deploy/web", [(R, None)]),
    ("service nginx $ACTION", [(R, None)]),
    ("/etc/init.d/nginx $ACTION", [(R, None)]),
    ('docker "$@"', [(R, None)]),
    ("systemctl status $SVC", []),
    ("docker logs $C", []),
    ("docker compose logs $SVC", []),
    ("kubectl get pods -n $NS", []),
    # a shell or source reading its input by name, or what a process substitution prints
    ("bash /dev/stdin <<< 'docker restart jellyfin'", [(R, "jellyfin")]),
    ("source /dev/stdin <<< 'docker restart jellyfin'", [(R, "jellyfin")]),
    (". <(echo docker restart jellyfin)", [(R, None)]),
    ("source ./env.sh && docker ps", []),
    # awk and sed run commands too (awk's system() and pipes, sed's e command and s///e)
    ("awk 'BEGIN{system(\"docker restart jellyfin\")}'", [(R, None)]),
    ("gawk -F: -v x=1 'BEGIN{system(\"systemctl restart nginx\")}' /etc/passwd", [(R, None)]),
    ("awk '{print \"docker restart \" $1 | \"sh\"}' names.txt", [(R, None)]),
    ("sed '1e docker restart jellyfin' /dev/null", [(R, None)]),
    ("sed -n -e p -e '1e systemctl restart nginx' f", [(R, None)]),
    ("echo x | sed 's/x/docker restart jellyfin/e'", [(R, None)]),
    # ...and, running nothing, they only read, count and print
    ("awk '/docker/ && /restart/ {n++} END {print n+0}' /var/log/syslog", []),
    ("awk '{print \"docker restart \" $1}' names.txt", []),
    ("sed -i '/^services:/,$ s/restart: no/restart: always/' docker-compose.yml", []),
    ("sed -i 's/docker restart/docker compose restart/g' deploy.sh", []),
    ("journalctl -u nginx | sed -n '/nginx.service: .*restart/p'", []),
    ("docker ps | awk '{print $1}'", []),
    ("docker ps | sed 's/restart/x/'", []),
    ("awk -f restart.awk; docker ps", []),   # a program in a file we cannot see
    # more wrappers
    ("unbuffer docker restart jellyfin", [(R, "jellyfin")]),
    ("faketime '-1d' docker restart jellyfin", [(R, "jellyfin")]),
    ("faketime -f '@2026-01-01 00:00:00' systemctl restart nginx", [(R, "nginx")]),
    ("valgrind --tool=memcheck docker restart jellyfin", [(R, "jellyfin")]),
    ("firejail --noprofile docker restart jellyfin", [(R, "jellyfin")]),
    ("catchsegv systemctl restart nginx", [(R, "nginx")]),
    ("daemonize -c /tmp -p /run/fix.pid /usr/bin/systemctl restart nginx", [(R, "nginx")]),
    ("gdb -batch -ex run --args docker restart jellyfin", [(R, "jellyfin")]),
    ("gdb -p 1234 -batch -ex bt", []),
    ("sg docker -c 'docker restart jellyfin'", [(R, "jellyfin")]),
    ("sg - docker 'systemctl restart nginx'", [(R, "nginx")]),
    ("sg docker -c 'docker ps'", []),
    # a process substitution is a word of its command, which goes on after it
    ("docker compose -f <(envsubst < compose.yml) up -d", [(R, None)]),
    ("diff <(docker ps) <(ssh nas docker ps) && systemctl restart nginx", [(R, "nginx")]),
    ("docker restart jellyfin > >(tee -a restarts.log) 2> >(tee -a errors.log >&2)", [(R, "jellyfin")]),
    ("paste <(docker ps) <(systemctl status nginx)", []),
    # ...and what it prints is a shell's script or input, made at run time
    ("bash <(echo 'docker restart jellyfin')", [(R, None)]),
    ("bash -x <(curl -fsSL http://nas/restart.sh) && docker ps", [(R, None)]),
    ("bash < <(echo 'systemctl restart nginx')", [(R, None)]),
    ("bash <(kubectl completion bash)", []),
    # bash's $'…' (its escapes read as bash reads them) and $"…" are quoting too
    ("docker re$'start' jellyfin", [(R, "jellyfin")]),
    ("$'systemctl' restart nginx", [(R, "nginx")]),
    ("docker rest$''art jellyfin", [(R, "jellyfin")]),
    ("systemctl re$'st\\x61rt' nginx", [(R, "nginx")]),
    ("docker restart $'j\\145llyfin'", [(R, "jellyfin")]),
    ("kubectl rollout re$'start' deploy/web", [(R, "web")]),
    ("service nginx re$\"start\"", [(R, "nginx")]),
    ("echo $'it\\'s restart time'; docker ps", []),
])
def test_what_bash_would_run_however_it_is_written(line, expected):
    assert found(line) == expected


@pytest.mark.parametrize("line, expected", [
    # tmux: a new session, window or pane, run-shell, a popup, pipe-pane and if-shell run a command
    ("tmux new-session -d 'systemctl restart nginx'", [(R, "nginx")]),
    ("tmux new -d -s fix docker restart jellyfin", [(R, "jellyfin")]),
    ("tmux new-window -n fix 'docker restart jellyfin'", [(R, "jellyfin")]),
    ("tmux splitw -d -l 10 'systemctl restart nginx'", [(R, "nginx")]),
    ("tmux respawn-pane -k -t ops:1 'docker restart jellyfin'", [(R, "jellyfin")]),
    ("tmux run-shell -b 'docker restart jellyfin'", [(R, "jellyfin")]),
    ("tmux run -d 5 'systemctl restart nginx'", [(R, "nginx")]),
    ("tmux display-popup -E 'docker restart jellyfin'", [(R, "jellyfin")]),
    ("tmux if-shell 'test -f /tmp/go' 'new-window \"docker restart jellyfin\"'", [(R, "jellyfin")]),
    ("tmux -L ops -c 'systemctl restart nginx'", [(R, "nginx")]),
    ("byobu new-session -d 'docker restart jellyfin'", [(R, "jellyfin")]),
    # ...in the directory -c names, the caller's for a new session, else one not known
    ("tmux split-window -d -c /opt/media 'docker compose restart'", [(R, "media")]),
    ("cd /opt/media && tmux new -d 'docker compose up -d'", [(R, "media")]),
    ("cd /opt/media && tmux new-window 'docker compose up -d'", [(R, None)]),
    # ...and what send-keys types, its keys' names as the keys (Enter, C-m, Space)
    ("tmux send-keys -t ops 'systemctl restart nginx' Enter", [(R, "nginx")]),
    ("tmux send -t ops:0 docker Space restart Space jellyfin C-m", [(R, "jellyfin")]),
    ("tmux send-keys -l -t ops 'docker restart jellyfin'", [(R, "jellyfin")]),
    ("tmux new -d -s ops \\; send-keys -t ops 'docker restart jellyfin' Enter", [(R, "jellyfin")]),
    ("tmux send-keys -t ops 'docker restart jellyfin' enter", [(R, "jellyfin")]),   # key names in any case
    ("tmux send-keys -c /dev/pts/1 -t ops 'systemctl restart nginx' c-m", [(R, "nginx")]),
    ("tmux new -d -s ops\\; new-window 'docker restart jellyfin'", [(R, "jellyfin")]),   # an argument ending in ;
    ("tmux new -d -s ops 'echo a\\;' \\; new-window 'docker restart jellyfin'", [(R, "jellyfin")]),
    ("tmux split-window -c '#{pane_current_path}' 'docker compose up -d'", [(R, None)]),   # a format: unknown
    ("tmux display-popup -d /opt/media -c /dev/pts/1 -E 'docker compose restart'", [(R, "media")]),
    ("tmux send-keys -t ops 'docker compose' Space up Enter", []),   # tmux sends "up" as the Up key
    ("tmux send-keys -t ops 'docker ps' Enter", []),
    ("tmux send-keys -t ops C-c", []),
    ("tmux send-keys -X -t ops copy-selection", []),
    ("tmux ls; tmux attach -t ops; tmux new -s work", []),
    ("cmd='docker restart jellyfin'; tmux new -d \"$cmd\"", [(R, None)]),
    # screen: a new window's command, and what -X makes a session type (stuff) or run
    ("screen -dmS fix systemctl restart nginx", [(R, "nginx")]),
    ("screen -d -m -L -Logfile /tmp/fix.log docker restart jellyfin", [(R, "jellyfin")]),
    ("screen -S ops -X stuff 'systemctl restart nginx\\n'", [(R, "nginx")]),
    ("screen -S ops -p 0 -X stuff 'docker restart jellyfin^M'", [(R, "jellyfin")]),
    ("screen -S ops -X screen -t fix docker restart jellyfin", [(R, "jellyfin")]),
    ("screen -X -S ops -p 0 stuff 'systemctl restart nginx\\015'", [(R, "nginx")]),   # -X is a flag; octal escapes
    ("screen -ls; screen -r ops; screen -S ops -X quit", []),
    ("screen -S ops -X stuff 'echo \\9\\q\\\\ done^J'", []),
    # dtach
    ("dtach -n /tmp/fix.sock -z systemctl restart nginx", [(R, "nginx")]),
    ("dtach -a /tmp/fix.sock", []),
])
def test_what_terminal_multiplexers_run_or_type(line, expected):
    assert found(line) == expected


@pytest.mark.parametrize("line, expected", [
    # a command run inside a container, a pod or a guest, as ssh's is on a host
    ("docker exec jellyfin supervisorctl restart transcoder", [(R, "transcoder")]),
    ("docker exec -it -u root -w /app web sh -c 'service nginx restart'", [(R, "nginx")]),
    ("docker -H ssh://nas container exec -e A=1 web supervisorctl restart app", [(R, "app")]),
    ("podman exec web systemctl restart nginx", [(R, "nginx")]),
    ("docker compose -p media exec -T jellyfin supervisorctl restart transcoder", [(R, "transcoder")]),
    ("docker-compose exec web supervisorctl restart app", [(R, "app")]),
    ("kubectl -n prod exec -it deploy/web -c app -- supervisorctl restart app", [(R, "app")]),
    ("kubectl exec -n prod web supervisorctl restart app", [(R, "app")]),   # the form before --
    ("microk8s kubectl exec web -- supervisorctl restart app", [(R, "app")]),
    ("lxc exec pihole -- systemctl restart pihole-ftl", [(R, "pihole-ftl")]),
    ("incus exec c1 --env A=b -- systemctl restart nginx", [(R, "nginx")]),
    ("pct exec 101 -- systemctl restart nginx", [(R, "nginx")]),
    ("machinectl shell root@c1 /usr/bin/systemctl restart nginx", [(R, "nginx")]),
    ("echo 'supervisorctl restart app' | docker exec -i web sh", [(R, "app")]),
    ("podman exec -l systemctl restart nginx", [(R, "nginx")]),   # the latest container, named by no word
    ("nerdctl -n k8s.io exec abc systemctl restart nginx", [(R, "nginx")]),
    ("kubectl exec web-0 -n prod -c app supervisorctl restart app", [(R, "app")]),   # old: options anywhere
    ("kubectl -n exec exec web -- supervisorctl restart app", [(R, "app")]),   # a namespace called exec
    ("minikube kubectl -- exec web -- supervisorctl restart app", [(R, "app")]),
    ("oc debug node/n1 -- chroot /host systemctl restart kubelet", [(R, "kubelet")]),
    ("oc rsh -c app web-1 supervisorctl restart app", [(R, "app")]),
    ("k3s crictl exec -i abc systemctl restart nginx", [(R, "nginx")]),
    ("lxc --project homelab exec c1 --env A=b systemctl restart nginx", [(R, "nginx")]),
    ("lxc-attach -n c1 -- systemctl restart nginx", [(R, "nginx")]),
    ("qm guest exec 101 -- systemctl restart nginx", [(R, "nginx")]),
    ("machinectl shell --uid=0 c1 /usr/bin/systemctl restart nginx", [(R, "nginx")]),
    ("multipass exec vm -- sudo systemctl restart nginx", [(R, "nginx")]),
    ("distrobox enter box -- sudo systemctl restart nginx", [(R, "nginx")]),
    ("vagrant ssh web -c 'sudo systemctl restart nginx'", [(R, "nginx")]),
    # ...in a directory no one can know there
    ("cd /opt/media && docker exec tools docker compose restart", [(R, None)]),
    # ...and what runs nothing like a restart
    ("docker exec web nginx -s reload", []),
    ("docker exec -it db psql -U app -c 'select count(*) from jobs'", []),
    ("kubectl exec deploy/web -- curl -s localhost:8080/health", []),
    ("docker compose exec web python manage.py migrate", []),
    ("pct exec 101 -- df -h && pct list", []),
    ("kubectl exec -it web -- bash; oc rsh web-1; vagrant ssh; minikube kubectl -- get pods", []),
    # a help or a dry run runs nothing
    ("docker exec -h web supervisorctl restart app", []),
    ("kubectl exec --help web -- supervisorctl restart app", []),
    ("docker compose --dry-run exec web supervisorctl restart app", []),
])
def test_what_containers_and_guests_run(line, expected):
    assert found(line) == expected


def test_substitutions_nested_too_deeply_are_refused_not_raised():
    """Each $( was once a level of recursion: a thousand of them raised
    RecursionError, and the hook let the restart before them through."""
    for line in ("systemctl force-reload jellyfin; : " + "$(" * 1000, "docker restart jellyfin; " + "`$(" * 500):
        (item,) = recognise(line, "/home/ops")
        assert item.service is None and item.target == "a command nested too deeply to read"


def test_sudo_starts_the_command_with_an_environment_of_its_own():
    work = "/srv/ops/work"
    assert found("export COMPOSE_PROJECT_NAME=other; sudo docker compose up -d", work) == [(R, "work")]
    assert found("COMPOSE_PROJECT_NAME=other sudo docker compose up -d", work) == [(R, "work")]
    assert found("export COMPOSE_PROJECT_NAME=other; sudo -E docker compose up -d", work) == [(R, "other")]
    assert found("export COMPOSE_PROJECT_NAME=other; sudo --preserve-env=COMPOSE_PROJECT_NAME docker compose up",
                 work) == [(R, "other")]
    assert found("sudo COMPOSE_PROJECT_NAME=other docker compose up -d", work) == [(R, "other")]
    assert found("export COMPOSE_PROJECT_NAME=other; env -i docker compose up -d", work) == [(R, "work")]
    # a login shell starts in the target user's home, not here, unless told -D
    assert found("sudo -i docker compose up -d", work) == [(R, None)]
    assert found("sudo --login docker compose up -d", work) == [(R, None)]
    assert found("sudo -iD/srv/jellyfin docker compose up -d", work) == [(R, "jellyfin")]
    assert found("sudo -s docker compose up -d", work) == [(R, "work")]
    # and so through a shell it starts, as a directory and variables a prefix gives do
    assert found("sudo -i bash -c 'docker compose up -d'", work) == [(R, None)]
    assert found("env -C /srv/jellyfin bash -c 'docker compose up -d'", work) == [(R, "jellyfin")]
    assert found("cd /srv && env -C jellyfin sh <<< 'docker compose up -d'", work) == [(R, "jellyfin")]
    assert found("COMPOSE_PROJECT_NAME=other bash -c 'docker compose up -d'", work) == [(R, "other")]
    assert found("export COMPOSE_PROJECT_NAME=other; sudo bash -c 'docker compose up -d'", work) == [(R, "work")]
    assert found("env -C /srv/jellyfin ssh host 'docker compose up -d'", work) == [(R, None)]
    # -u's value glued to it is a user's name, not more letters: no -E in "-uEve"
    assert found("export COMPOSE_PROJECT_NAME=other; sudo -uEve docker compose up -d", work) == [(R, "work")]


def test_systemd_run_starts_a_service_where_and_with_what_the_service_manager_gives():
    """A transient service starts in / with the manager's environment and
    what -E sets; a --scope (or -d) runs where systemd-run was called."""
    work = "/srv/ops/work"
    assert found("cd /srv/jellyfin && systemd-run --scope docker compose up -d", work) == [(R, "jellyfin")]
    assert found("cd /srv/jellyfin && systemd-run -dq docker compose up -d", work) == [(R, "jellyfin")]
    assert found("systemd-run --working-directory=/srv/arr docker compose restart", work) == [(R, "arr")]
    assert found("systemd-run -E COMPOSE_PROJECT_NAME=media -d docker compose restart", work) == [(R, "media")]
    assert found("export COMPOSE_PROJECT_NAME=other; systemd-run -d docker compose up -d", work) == [(R, "work")]
    assert found("export COMPOSE_PROJECT_NAME=other; systemd-run --scope docker compose up -d", work) == [
        (R, "other")]
    for line in ("cd /srv/jellyfin && systemd-run docker compose up -d", "systemd-run --user docker compose up -d"):
        (item,) = recognise(line, work)
        assert item.service is None and "unknown directory" in item.target


def test_at_runs_what_it_is_fed_where_it_was_called_and_what_it_cannot_read_is_refused():
    work = "/srv/ops/work"
    assert found("cd /srv/jellyfin && echo 'docker compose up -d' | at now", work) == [(R, "jellyfin")]
    (item,) = recognise('echo "docker restart $name" | at now', work)
    assert item.service is None and item.target == "the commands a shell reads from its input"


def test_run0_starts_a_service_with_an_environment_of_its_own_where_its_user_works():
    """run0 keeps the caller's directory for root and starts in the target
    user's home (unknown here) otherwise; it passes on only what --setenv
    sets, as sudo passes on nothing."""
    work = "/srv/ops/work"
    assert found("cd /srv/jellyfin && run0 docker compose up -d", work) == [(R, "jellyfin")]
    assert found("run0 -u root docker compose restart", work) == [(R, "work")]
    assert found("run0 -D /srv/arr docker compose restart", work) == [(R, "arr")]
    assert found("run0 --chdir=/srv/arr -u ops docker compose restart", work) == [(R, "arr")]
    assert found("export COMPOSE_PROJECT_NAME=other; run0 docker compose up -d", work) == [(R, "work")]
    assert found("run0 --setenv=COMPOSE_PROJECT_NAME=media docker compose up -d", work) == [(R, "media")]
    for line in ("run0 -u ops docker compose up -d", "run0 -uops docker compose up -d",
                 "run0 --user=ops docker compose restart"):
        (item,) = recognise(line, work)
        assert item.service is None and "unknown directory" in item.target


def test_a_cd_or_an_export_in_a_subshell_ends_with_it():
    work = "/srv/ops/work"
    assert found("(cd /opt/other && docker compose restart) ; docker compose restart", work) == [
        (R, "other"), (R, "work")]
    assert found('x="$(cd /opt/other && docker compose restart)"; docker compose restart', work) == [
        (R, "other"), (R, "work")]
    assert found("export COMPOSE_PROJECT_NAME=media; docker compose up -d", work) == [(R, "media")]
    assert found("(export COMPOSE_PROJECT_NAME=media); docker compose up -d", work) == [(R, "work")]
    assert found("COMPOSE_FILE=/opt/media/compose.yml docker compose up -d", work) == [(R, "media")]
    assert found("export COMPOSE_FILE=/opt/arr/compose.yml:/opt/arr/extra.yml; docker compose restart", work) == [
        (R, "arr")]
    assert found("x=`cd /opt/other`; docker compose up -d", work) == [(R, "work")]


def test_a_command_nested_too_deeply_to_read_is_refused_if_it_may_restart():
    (item,) = recognise("eval " * 7 + "docker restart jellyfin", "/home/ops")
    assert item.service is None and item.target == "a command nested too deeply to read"
    assert recognise("eval " * 7 + "uptime", "/home/ops") == []
    (item,) = recognise("eval " * 7 + "d'o'ck\\er restart jellyfin", "/home/ops")
    assert item.service is None
    (item,) = recognise("eval " * 7 + "oc rollout restart deployment/web", "/home/ops")
    assert item.service is None
    assert recognise("eval " * 7 + "ls /proc", "/home/ops") == []


def test_a_command_of_many_words_is_read_in_one_pass():
    """Each target once spelt out the whole command again: 30,000 words took 100 s."""
    assert found("docker restart jellyfin " + "sonarr " * 30_000) == [(R, "jellyfin"), (R, "sonarr")]


def test_heredocs_begun_in_one_anothers_bodies_are_read_without_running_out_of_stack():
    assert found("cat <<A\n" * 2000 + "docker restart jellyfin") == [(R, "jellyfin")]


@pytest.mark.parametrize("line, target", [
    ("docker restart $name", "$name"),
    ("docker restart ${SERVICE}", "${SERVICE}"),
    ("for s in jellyfin sonarr; do docker restart $s; done", "$s"),
    ("docker restart $(docker ps -q)", "$(…)"),
    ("docker ps -q | xargs docker restart", "<input of xargs>"),
    ("echo jellyfin | xargs -n1 sudo systemctl restart", "<input of xargs>"),
    ("echo jellyfin | xargs -I {} sh -c 'docker restart {}'", "{}"),
    ("systemctl restart 'jelly*'", "jelly*"),
    ("kubectl rollout restart deployment -n media", "the selected resources"),
    ("helm install --generate-name ./chart", "a release with a generated name"),
    ("podman restart --all", "every container, or the latest"),
    ("podman restart -l", "every container, or the latest"),
    ("podman restart --running", "every container, or the latest"),
    ("supervisorctl restart all", "every program, or a group"),
    ("supervisorctl restart workers:*", "every program, or a group"),
    ("supervisorctl restart workers:", "every program, or a group"),
    ("cmd='systemctl restart nginx'; echo \"$cmd\" | bash", "the commands a shell reads from its input"),
    ('c="docker restart jellyfin"; bash <<< "$c"', "the commands a shell reads from its input"),
    ("curl -s http://nas/restart-docker | sh", "the commands a shell reads from its input"),
    ("echo 'docker restart jellyfin' | tee -a log | bash", "the commands a shell reads from its input"),
    ("(echo 'docker restart jellyfin') | bash", "the commands a shell reads from its input"),
    ("find /srv -name 'jelly*' -exec docker restart {} +", "{}"),
    ("find . -type d -exec sh -c 'systemctl restart $(basename {})' \\;", "$(…)"),
    ("find /srv -name compose.yml -execdir docker compose up -d \\;", "the compose project in an unknown directory"),
    ("docker ps -q | parallel docker restart", "<input of parallel>"),
    ("parallel -a containers.txt docker restart", "<input of parallel>"),
    ("parallel systemctl restart :::: units.txt", "<input of parallel>"),
    ("cat restarts.txt | parallel ; docker ps", "the commands a shell reads from its input"),
    ("python3 -c 'import os; os.system(\"docker restart jellyfin\")'", OTHER_LANGUAGE),
    ("python3 -u -W ignore -c 'import os; os.system(\"systemctl restart nginx\")'", OTHER_LANGUAGE),
    ("python3 - <<'EOF'\nimport os\nos.system('systemctl restart nginx')\nEOF", OTHER_LANGUAGE),
    ("echo 'import os; os.system(\"docker restart jellyfin\")' | python3", OTHER_LANGUAGE),
    ("perl -e 'system \"docker restart jellyfin\"'", OTHER_LANGUAGE),
    ("perl -MPOSIX -le'system(q{systemctl restart nginx})'", OTHER_LANGUAGE),
    ("ruby -e 'system(\"systemctl restart nginx\")'", OTHER_LANGUAGE),
    ("node --eval='require(\"child_process\").execSync(\"docker restart jellyfin\")'", OTHER_LANGUAGE),
    ("php -r 'shell_exec(\"docker restart jellyfin\");'", OTHER_LANGUAGE),
    ("perl -MTime::HiRes -e 'system(\"docker restart jellyfin\")'", OTHER_LANGUAGE),
    ("node --require dotenv/config -e 'require(\"child_process\").execSync(\"docker restart jellyfin\")'",
     OTHER_LANGUAGE),
    ("pypy3 -c 'import os; os.system(\"docker restart jellyfin\")'", OTHER_LANGUAGE),
    ("docker compose -p \"$PROJECT\" restart", "the compose project in an unknown directory"),
    ("D=docker; $D restart jellyfin", "a command named at run time"),
    ("\"$(which systemctl)\" restart nginx", "a command named at run time"),
    ("docker rest${x}art jellyfin", "a command whose words are spelt at run time"),
    ("systemctl re$(true)start nginx", "a command whose words are spelt at run time"),
    ("qm reboot $VMID", "$VMID"),
    ("virsh $ACTION web", "an action spelt at run time"),
    ("qm re$(true)boot 101", "a command whose words are spelt at run time"),
    ("virsh \"reboot 'web\"", "a virsh command line it cannot read"),
    ("lxc restart --all", "every instance"),
    ("multipass start --all", "every instance"),
    ("incus $ACTION web", "an action spelt at run time"),
    ("python3 -c 'import os; os.system(\"vagrant reload web\")'", OTHER_LANGUAGE),
    ("D=vagrant; $D reload web", "a command named at run time"),
    ("vagrant rel${x}oad web", "a command whose words are spelt at run time"),
    ("vagrant up /web[0-9]/", "/web[0-9]/"),
    ("vagrant reload 1a2b3c4", "the machine 1a2b3c4, named by its id"),
    ("vagrant reload deadbee", "the machine deadbee, named by its id"),
    ("vagrant up 1a2b", "the machine 1a2b, named by its id"),
    ("vagrant reload " + "0123456789abcdef" * 2, f"the machine {'0123456789abcdef' * 2}, named by its id"),
    ("VAGRANT_CWD=~ vagrant reload", "the machines of the Vagrantfile in an unknown directory"),
    ("ssh lab vagrant reload", "the machines of the Vagrantfile in an unknown directory"),
    ("docker restart 3f2a1b9c4d5e", "the container 3f2a1b9c4d5e, named by its id"),
    ("podman start " + "0123456789abcdef" * 4, f"the container {'0123456789abcdef' * 4}, named by its id"),
])
def test_targets_that_cannot_be_read_are_recognised_without_a_service(line, target):
    (item,) = recognise(line, "/home/ops")
    assert item.service is None and item.target == target


def test_compose_without_a_directory_names_no_service():
    (item,) = recognise("ssh nas docker compose restart", "/home/ops")
    assert item.service is None and "unknown directory" in item.target


def test_an_init_script_is_found_by_its_path_from_where_the_session_works():
    assert found("./nginx restart", "/etc/init.d") == [(R, "nginx")]
    assert found("./nginx restart", "/opt/app") == []
    assert found("./nginx restart", None) == []   # where it runs is unknown: not an init script as far as it says


def test_recognised_item_keeps_the_simple_command():
    (item,) = recognise("cd /opt && sudo docker restart -t 5 jellyfin | tee log", None)
    assert item.command == "docker restart -t 5 jellyfin" and item.target == "jellyfin"


@pytest.mark.parametrize("raw, expected", [
    ("jellyfin", "jellyfin"), ("Jellyfin", "jellyfin"), ("nginx.service", "nginx"), (" web-1 ", "web-1"),
    ("getty@tty1", "getty@tty1"), ("$name", None), ("jelly*", None), ("", None), ("-t", None),
    ("a" * 101, None), ("a:b", None),
])
def test_normalise_service(raw, expected):
    assert normalise_service(raw) == expected


def test_split_commands_drops_operators_and_redirection_targets():
    assert split_commands("a 1 2>&1 | b > out; c < in && d &") == [["a", "1"], ["b"], ["c"], ["d"]]
    assert split_commands("echo 'a; b' \"c && d\"") == [["echo", "a; b", "c && d"]]
    assert split_commands("find . -exec rm {} \\; -print; ls '>' \\|") == [
        ["find", ".", "-exec", "rm", "{}", ";", "-print"], ["ls", ">", "|"]]


def test_simple_commands_follow_cd():
    commands = list(simple_commands("cd /opt && cd media && docker ps; cd ..; ls", "/home"))
    assert [(c.words, c.cwd) for c in commands] == [(["docker", "ps"], "/opt/media"), (["ls"], "/opt")]


def test_parse_args_reads_options_like_getopt():
    args = parse_args(["-dt", "5", "--pull=always", "--scale", "web=2", "web", "--", "-x"],
                      {"-t", "--scale", "--pull"})
    assert args.positionals == ["web", "-x"]
    assert args.values("-t") == ["5"] and args.value("--pull") == "always" and args.has("-d")
    assert parse_args(["-H", "host", "restart", "-t", "5"], {"-H"}, stop_at_positional=True).positionals == [
        "restart", "-t", "5"]
    # Values in the order given, whatever their spelling: the last one given wins.
    spelt = parse_args(["--file", "b.yml", "-f", "a.yml", "--file=c.yml"], {"-f", "--file"})
    assert spelt.values("-f", "--file") == ["b.yml", "a.yml", "c.yml"] and spelt.value("-f", "--file") == "c.yml"


def test_read_options_stops_at_the_command_and_ends_a_cluster_at_its_value():
    assert read_options(["-iu", "root", "systemctl", "-q"], {"-u"}) == ([("-iu", "root")], ["systemctl", "-q"])
    assert read_options(["-dmSweb", "top"], {"-S"}) == ([("-dmS", "web")], ["top"])
    assert read_options(["--chdir=/srv", "--", "-x"], {"-D"}) == ([("--chdir", "/srv")], ["-x"])
    assert read_options(["--chdir", "/srv", "ls"], {"--chdir"}) == ([("--chdir", "/srv")], ["ls"])
    assert read_options(["-n", "-t"], {"-t"}) == ([("-n", None), ("-t", None)], [])   # a value that never came
    assert read_options(["-", "x"], set()) == ([], ["-", "x"])
