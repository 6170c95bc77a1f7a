"""The redactor: each credential shape it catches, the near misses it leaves
alone, secret environment values, raw stream-json lines kept valid, the run
log written in chunks, and the database listener. docs/security.md lists
the same shapes."""
from __future__ import annotations

import dataclasses
import json
import random
from urllib.parse import urlsplit

import pytest
from hypothesis import given, settings, strategies as st
from sqlalchemy import text

from app.config import ConfigError, load_settings
from app.database_url import service_url
from app.extensions import db
from app.models import Session, SessionActivity
from app.redaction import MIN_SECRET_LENGTH, REPLACEMENT, SHAPES, Redactor, build, secret_env_values
from app.sessions import runlog
from app.sessions.runlog import RedactedLog
from tests import streamlines as sl
from tests.conftest import make_app

R = REPLACEMENT
PEM_BODY = "MIIEpAIBAAKCAQEA3Tz2mr7SZiAMfQyuvBjM2m\nd6QO0a/Lbvm+7oGFWp0Rk7vyVxq==\n"
PEM = f"-----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}-----END RSA PRIVATE KEY-----"
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"

# (text, what it must become): every shape docs/security.md lists.
CAUGHT = [
    ("Authorization: Bearer abcDEF123456789xyz", f"Authorization: Bearer {R}"),
    ("curl -H 'Authorization: Basic dXNlcjpwYXNzd29yZA==' x", f"curl -H 'Authorization: Basic {R}' x"),
    ("> Proxy-Authorization: Basic dXNlcjpwYXNzd29yZA==", f"> Proxy-Authorization: Basic {R}"),
    ("proxy-authorization: negotiate YIIGhgYGKwYBBQUCoIIGejCCBnag", f"proxy-authorization: negotiate {R}"),
    ('headers = {"Authorization": "token 0123456789abcdef"}', f'headers = {{"Authorization": "token {R}"}}'),
    ("got Bearer my-token.v2 back", f"got Bearer {R} back"),
    ("key sk-ant-api03-AbCdEfGhIjKlMnOpQrStUv-123_x end", f"key {R} end"),
    ("OPENAI=sk-proj-abcdefghijk1234567890xyz", f"OPENAI={R}"),
    ("ghp_" + "a1B2" * 9, R),
    ("gho_" + "Z9y8" * 9 + " and ghs_" + "Q7w6" * 9, f"{R} and {R}"),
    ("github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz", R),
    ("glpat-abcdefghij1234567890", R),
    ("slack xoxb-1234567890-0987654321-abcdefABCDEF", f"slack {R}"),
    ("xoxp-1234567890-abcdef", R),
    ("AKIAIOSFODNN7EXAMPLE", R),
    ("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", f"aws_secret_access_key = {R}"),
    ("AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG", f"AWS_SECRET_ACCESS_KEY={R}"),
    (f"token {JWT}.", f"token {R}."),
    (PEM + "\nThat was the key.", f"{R}\nThat was the key."),
    ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmU\nAAAA", R),
    ("-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nlQOYBF+abc\n=x1y2\n-----END PGP PRIVATE KEY BLOCK-----", R),
    ("password=hunter2 next", f"password={R} next"),
    ("passwd: foo12345", f"passwd: {R}"),
    ("secret=abc token=xyz api_key=k1 apikey=k2 API-KEY: k3", f"secret={R} token={R} api_key={R} apikey={R} API-KEY: {R}"),
    ("export DB_PASSWORD='s3cret!' PGPASSWORD=x1", f"export DB_PASSWORD='{R}' PGPASSWORD={R}"),
    ('{"password": "hunter2", "client_secret": "cs-1"}', f'{{"password": "{R}", "client_secret": "{R}"}}'),
    ("https://x/cb?access_token=abc123&state=9", f"https://x/cb?access_token={R}&state=9"),
    ("private_key => k3y", f"private_key => {R}"),
    # A subscript's key, as code and configuration assign it.
    ("app.config['SECRET_KEY'] = 'dev-key-123' and os.environ[\"DB_PASS\"] = \"s3cret-pw\"",
     f"app.config['SECRET_KEY'] = '{R}' and os.environ[\"DB_PASS\"] = \"{R}\""),
    ("mysql --password hunter2 --user bob", f"mysql --password {R} --user bob"),
    ("curl --api-key k3yVa1ue https://x && tool -apikey K3Y2", f"curl --api-key {R} https://x && tool -apikey {R}"),
    ("mysqld --rootpassword Hunter2xyz && ngrok --authtoken 2abcDEF345ghi",
     f"mysqld --rootpassword {R} && ngrok --authtoken {R}"),
    ("DB_PASSWORD='$Up3r-S3cret' and API_TOKEN=${TOKEN:-d3fault-t0ken}",
     f"DB_PASSWORD='{R}' and API_TOKEN=${{TOKEN:{R}}}"),   # a default given in the text may be the secret
    # JSON kept in a JSON string (a Kubernetes last-applied-configuration annotation).
    ('annotation: "{\\"password\\": \\"KubeSecretPw42\\"}"', f'annotation: "{{\\"password\\": \\"{R}\\"}}"'),
    ("DB_PASS='s3cret!' MYSQL_ROOT_PWD: x9y8z7 REDIS_PASS=\"q1w2\"", f"DB_PASS='{R}' MYSQL_ROOT_PWD: {R} REDIS_PASS=\"{R}\""),
    ("export REDISCLI_AUTH=R3disAuth1 BASIC_AUTH=admin:B4sicPw; os.environ[\"HTTP_AUTH\"] = \"Http4uth\"",
     f"export REDISCLI_AUTH={R} BASIC_AUTH={R}; os.environ[\"HTTP_AUTH\"] = \"{R}\""),
    ("GET /login?user=bob&pwd=s3cr3t&next=/ and /auth;pass=hunter2", f"GET /login?user=bob&pwd={R}&next=/ and /auth;pass={R}"),
    ("openssl enc -aes256 -pass pass:S3cret -in x && openssl rsa -passin pass:K3y2",
     f"openssl enc -aes256 -pass pass:{R} -in x && openssl rsa -passin pass:{R}"),
    ("GET /login?user=bob&password%3Dhunter2", f"GET /login?user=bob&password%3D{R}"),
    ("mysql -uroot -pS3cretPw db && /usr/bin/mysqldump -h db -u root -pAn0ther x",
     f"mysql -uroot -p{R} db && /usr/bin/mysqldump -h db -u root -p{R} x"),
    ("docker exec -it db mysql -uroot -pS3cret; ps -u mysql -p12345; sudo mysql -pAbc1",
     f"docker exec -it db mysql -uroot -p{R}; ps -u mysql -p12345; sudo mysql -p{R}"),
    ('{"command": "mysql -u root -pS3cret -e \\"show databases\\""}',
     f'{{"command": "mysql -u root -p{R} -e \\"show databases\\""}}'),
    ("mariadb -p'Qu0ted' -e 'select 1'", f"mariadb -p'{R}' -e 'select 1'"),
    # On a line after one ending in an option (in a raw line too, the line break escaped).
    ("ls -l\nmysql -uroot -pN3xtLine1 db", f"ls -l\nmysql -uroot -p{R} db"),
    # Run after the end of options, or as a shell's command string.
    ("kubectl exec -it mysql-0 -- mysql -uroot -pK8sS3cret; docker exec db sh -c \"mysqldump -pSh3llPw x\"",
     f"kubectl exec -it mysql-0 -- mysql -uroot -p{R}; docker exec db sh -c \"mysqldump -p{R} x\""),
    ("bash -lc 'curl -u admin:Bash3dPw x'", f"bash -lc 'curl -u admin:{R} x'"),
    ("sshpass -p S3cret ssh host && sshpass -v -pS3cret scp a b", f"sshpass -p {R} ssh host && sshpass -v -p{R} scp a b"),
    ("sshpass -p 'S3cret' ssh host; sshpass -p\"S3cret\" scp a b", f"sshpass -p '{R}' ssh host; sshpass -p\"{R}\" scp a b"),
    ("curl -u admin:S3cret https://x; curl -s --user=admin:pw x; curl -uadmin:pw2 x",
     f"curl -u admin:{R} https://x; curl -s --user=admin:{R} x; curl -uadmin:{R} x"),
    ("curl --ntlm -u 'CORP\\bob:NtlmS3cret' x", f"curl --ntlm -u 'CORP\\bob:{R}' x"),
    # Other clients' password flags, each in its own client's command.
    ("redis-cli -h cache -a S3cretRedis ping; redis-cli --user app --pass 'my redis pw' -p 6380 get k",
     f"redis-cli -h cache -a {R} ping; redis-cli --user app --pass '{R}' -p 6380 get k"),
    ("mongosh -u admin -p M0ngoPw --port 27017 && mongodump -u a -pM0ngoDump --port 27018 -o /b",
     f"mongosh -u admin -p {R} --port 27017 && mongodump -u a -p{R} --port 27018 -o /b"),
    ('docker login -u ci -p D0ckerPw registry.io; podman login -p "P0dman pw" q.io',
     f'docker login -u ci -p {R} registry.io; podman login -p "{R}" q.io'),
    ("docker login -u ci --password D0ckerLong1 r.io", f"docker login -u ci --password {R} r.io"),
    ("ldapsearch -x -D cn=admin,dc=ex -w LdapS3cret -b dc=ex -s sub; ldapwhoami -xwLdapJoined1 -H ldap://dc",
     f"ldapsearch -x -D cn=admin,dc=ex -w {R} -b dc=ex -s sub; ldapwhoami -xw{R} -H ldap://dc"),
    ("ldapmodify -D cn=admin -w 'ldap mod pw' -f x.ldif && ldappasswd -x -w B1ndPw -a 0ldPw123 -s N3wPw456 uid=bob",
     f"ldapmodify -D cn=admin -w '{R}' -f x.ldif && ldappasswd -x -w {R} -a {R} -s {R} uid=bob"),
    ("smbclient //fs/share -U bob%SmbS3cret -c ls; rpcclient --user=CORP\\bob%RpcS3cret dc",
     f"smbclient //fs/share -U bob%{R} -c ls; rpcclient --user=CORP\\bob%{R} dc"),
    ("smbcacls -U 'bob%my smb pw' //fs/s f; smbmap -u admin -p SmbmapPw1 -H 10.0.0.5 -P 445",
     f"smbcacls -U 'bob%{R}' //fs/s f; smbmap -u admin -p {R} -H 10.0.0.5 -P 445"),
    ('{"command": "redis-cli -a \\"S3cretRedisQ\\" ping; smbclient -U \\"bob%SmbS3cretQ\\" -L fs"}',
     f'{{"command": "redis-cli -a \\"{R}\\" ping; smbclient -U \\"bob%{R}\\" -L fs"}}'),
    ("kubectl exec -it redis-0 -- redis-cli -a S3cretRedis2; sh -c 'ldapsearch -x -w LdapS3cret2 -b dc=ex'",
     f"kubectl exec -it redis-0 -- redis-cli -a {R}; sh -c 'ldapsearch -x -w {R} -b dc=ex'"),
    # A BMC's: ipmitool's password and Kg keys (-p is its port), Dell's racadm.
    ("ipmitool -I lanplus -H 10.0.0.9 -U admin -P Ipm1S3cret -p 623 chassis status; "
     "ipmitool -H bmc -U admin -PIpm1Joined -k Kg1Key4 -y 0a1b2c3d4e sel list; racadm -r idrac -u root -p Rac4dmPw getsysinfo",
     f"ipmitool -I lanplus -H 10.0.0.9 -U admin -P {R} -p 623 chassis status; "
     f"ipmitool -H bmc -U admin -P{R} -k {R} -y {R} sel list; racadm -r idrac -u root -p {R} getsysinfo"),
    # Net-SNMP's clients: SNMPv3's passphrases and v1's and v2c's community.
    ("snmpwalk -v3 -u mon -l authPriv -a SHA -A 'Snmp auth pw' -x AES -X Snmp9Priv 10.0.0.1 system; "
     "snmpget -v2c -c Snmp7Comm host sysUpTime.0; snmpbulkwalk -v 2c -cSnmp8Comm -Cr10 host",
     f"snmpwalk -v3 -u mon -l authPriv -a SHA -A '{R}' -x AES -X {R} 10.0.0.1 system; "
     f"snmpget -v2c -c {R} host sysUpTime.0; snmpbulkwalk -v 2c -c{R} -Cr10 host"),
    ('{"command": "snmpset -v3 -u ops -l authPriv -A \\"Snmp json auth\\" -X \\"Snmp json priv\\" h sysContact.0 s me"}',
     f'{{"command": "snmpset -v3 -u ops -l authPriv -A \\"{R}\\" -X \\"{R}\\" h sysContact.0 s me"}}'),
    # htpasswd -b: the command's last word, before a redirection or the end of its string.
    ("htpasswd -bc /etc/nginx/.htpasswd admin Htpw0rd1 && nginx -s reload; htpasswd -nbB admin 'ht pass word' > /dev/null 2>&1",
     f"htpasswd -bc /etc/nginx/.htpasswd admin {R} && nginx -s reload; htpasswd -nbB admin '{R}' > /dev/null 2>&1"),
    ('{"command": "htpasswd -nb admin \\"Htp json pw\\"", "description": "hash"}; sh -c \'htpasswd -b -C 10 f u Htp4Sh\'',
     f'{{"command": "htpasswd -nb admin \\"{R}\\"", "description": "hash"}}; sh -c \'htpasswd -b -C 10 f u {R}\''),
    ("lftp -u admin,Lftp5ecret ftp.example.com; lftp -u 'bob,lftp pass word' -e 'mirror; bye' host",
     f"lftp -u admin,{R} ftp.example.com; lftp -u 'bob,{R}' -e 'mirror; bye' host"),
    ("az login -u ops@example.com -p Az5ecret1; hydra -l admin -p Hydr4Pw ssh://10.0.0.5",
     f"az login -u ops@example.com -p {R}; hydra -l admin -p {R} ssh://10.0.0.5"),
    ("nxc smb 10.0.0.0/24 -u admin -p 'Nxc pass 1'; netexec winrm h -u a -p N3texecPw; crackmapexec smb h -u a -pCr4ckPw; "
     "cme smb h -u a -p Cme5Pw; evil-winrm -i 10.0.0.5 -u Administrator -p 'Ev1l winrm' -P 5985",
     f"nxc smb 10.0.0.0/24 -u admin -p '{R}'; netexec winrm h -u a -p {R}; crackmapexec smb h -u a -p{R}; "
     f"cme smb h -u a -p {R}; evil-winrm -i 10.0.0.5 -u Administrator -p '{R}' -P 5985"),
    ('xfreerdp /u:admin /p:Rdp5ecret /v:host +clipboard; xfreerdp3 /u:a /p:"rdp quoted pw" /v:h; wlfreerdp /p:Wl4Rdp /v:h; '
     "sdl-freerdp /p:Sdl4Rdp /v:h",
     f'xfreerdp /u:admin /p:{R} /v:host +clipboard; xfreerdp3 /u:a /p:"{R}" /v:h; wlfreerdp /p:{R} /v:h; '
     f"sdl-freerdp /p:{R} /v:h"),
    # The MinIO client's secret key: the fourth word after alias set, or config host add.
    ("mc alias set myminio http://10.0.0.5:9000 minioadmin Min10Secret --api S3v4; "
     "mc ls s3 && mc config host add s3 'https://s3.example.com' s3access 'Mc old secret'",
     f"mc alias set myminio http://10.0.0.5:9000 minioadmin {R} --api S3v4; "
     f"mc ls s3 && mc config host add s3 'https://s3.example.com' s3access '{R}'"),
    # A user's password given by its place: ipmitool's (the size after it
    # stays), racadm's attribute (any case) and old config, mc admin user add.
    ("ipmitool -I lanplus -H bmc -U admin -E user set password 3 'Ipmi new pw' 20; "
     "ipmitool user set password 4 Ipm1User",
     f"ipmitool -I lanplus -H bmc -U admin -E user set password 3 '{R}' 20; ipmitool user set password 4 {R}"),
    ("racadm set iDRAC.Users.2.Password Rac4Set1; racadm -r h -u root -E set idrac.users.3.PASSWORD 'Rac set q'; "
     "racadm config -g cfgUserAdmin -o cfgUserAdminPassword -i 2 Rac0ldCfg; "
     "racadm config -g cfgUserAdmin -i 3 -o cfgUserAdminPassword RacCfg2",
     f"racadm set iDRAC.Users.2.Password {R}; racadm -r h -u root -E set idrac.users.3.PASSWORD '{R}'; "
     f"racadm config -g cfgUserAdmin -o cfgUserAdminPassword -i 2 {R}; "
     f"racadm config -g cfgUserAdmin -i 3 -o cfgUserAdminPassword {R}"),
    ('{"command": "ipmitool -H bmc user set password 2 \\"Ipmi json pw\\" 16; '
     'racadm set iDRAC.Users.2.Password \\"Rac json\\""}',
     f'{{"command": "ipmitool -H bmc user set password 2 \\"{R}\\" 16; '
     f'racadm set iDRAC.Users.2.Password \\"{R}\\""}}'),
    # mc's options are not counted among its words, before them or between.
    ("mc admin user add myminio alice Al1ceSecret; mc alias set --api s3v4 myminio http://10.0.0.5:9000 ak Min10Api; "
     "mcli alias set --insecure --api=s3v4 m http://h ak --path auto MidSecret",
     f"mc admin user add myminio alice {R}; mc alias set --api s3v4 myminio http://10.0.0.5:9000 ak {R}; "
     f"mcli alias set --insecure --api=s3v4 m http://h ak --path auto {R}"),
    # A hash passed for the password, FreeRDP's gateway password.
    ("xfreerdp /u:admin /gp:GwPass1x /pth:8846f7eaee8fb117ad06bdd830b7586c /v:host; "
     "nxc smb 10.0.0.0/24 -u admin -H aad3b435b51404eeaad3b435b51404ee:31d6cfe0d16ae931b73c59d7e0c089c0; "
     "evil-winrm -i h -u a -H 'e19ccf75ee54e06b06a5907af13cef42'",
     f"xfreerdp /u:admin /gp:{R} /pth:{R} /v:host; nxc smb 10.0.0.0/24 -u admin -H {R}; "
     f"evil-winrm -i h -u a -H '{R}'"),
    # Net-SNMP's keys, and snmpusm's old and new passphrases (the user after them stays).
    ("snmpget -v3 -u mon -l authPriv -3m 0x1a2b3c4d5e6f -3k 0xaabbccddeeff -x AES -3K 0x9988776655 h sysUpTime.0; "
     "snmpusm -v3 -u admin -l authNoPriv -a MD5 -A Usm4uthPw host passwd -Co Usm0ldPw UsmN3wPw bob",
     f"snmpget -v3 -u mon -l authPriv -3m {R} -3k {R} -x AES -3K {R} h sysUpTime.0; "
     f"snmpusm -v3 -u admin -l authNoPriv -a MD5 -A {R} host passwd -Co {R} {R} bob"),
    # A secret-named environment variable as Kubernetes and ECS list them.
    ("env:\n- name: LOG_LEVEL\n  value: debug\n- name: DB_PASSWORD\n  value: K8sEnvPw1\n- name: REDIS_PASS\n"
     "  value: \"K8s quoted pw\"",
     f"env:\n- name: LOG_LEVEL\n  value: debug\n- name: DB_PASSWORD\n  value: {R}\n- name: REDIS_PASS\n"
     f"  value: \"{R}\""),
    ('{"env": [{"name": "DB_PASSWORD", "value": "K8sJsonPw2"}, {"name":"API_TOKEN","value":12345678}]}',
     f'{{"env": [{{"name": "DB_PASSWORD", "value": "{R}"}}, {{"name":"API_TOKEN","value":"{R}"}}]}}'),
    ('{\n    "name": "AWS_SECRET_ACCESS_KEY",\n    "value": "wJalrK8sJson3"\n}',
     f'{{\n    "name": "AWS_SECRET_ACCESS_KEY",\n    "value": "{R}"\n}}'),
    ("containers: [{env: [{name: client_secret, value: K8sFlowPw4}]}]",
     f"containers: [{{env: [{{name: client_secret, value: {R}}}]}}]"),
    # An _AUTH variable's, as the _AUTH variable rule takes it.
    ('- name: REDISCLI_AUTH\n  value: R3disK8sAuth\n{"name": "BASIC_AUTH", "value": "admin:B4sicJs0n"}',
     f'- name: REDISCLI_AUTH\n  value: {R}\n{{"name": "BASIC_AUTH", "value": "{R}"}}'),
    # A file the CLI read, each line numbered.
    ("    12\u2192      - name: DB_PASSWORD\n    13\u2192        value: K8sReadPw5",
     f"    12\u2192      - name: DB_PASSWORD\n    13\u2192        value: {R}"),
    # PHP's constants.
    ("define('DB_PASSWORD', 'Php S3cret');\ndefine( \"AUTH_TOKEN\", \"PhpTok3n\" ); define('DB_HOST', 'db');",
     f"define('DB_PASSWORD', '{R}');\ndefine( \"AUTH_TOKEN\", \"{R}\" ); define('DB_HOST', 'db');"),
    ("Cookie: session=abc123; theme=dark", f"Cookie: {R}"),
    ("< Set-Cookie: sid=xyz; Path=/; HttpOnly", f"< Set-Cookie: {R}"),
    ('{"Cookie": "session=abc"}', f'{{"Cookie": "{R}"}}'),
    ("postgres://admin:p4ss@db.example.com:5432/app", f"postgres://admin:{R}@db.example.com:5432/app"),
    ("redis://:p@ss:w0rd@cache:6379/0", f"redis://:{R}@cache:6379/0"),
    ("https://deploy:ghp_tok@github.com/o/r.git", f"https://deploy:{R}@github.com/o/r.git"),
    # Quoted, and as a tool call's input holds it: JSON-escaped quotes and tabs.
    ('docker login -u ci --password "Hunt3rQuoted1" x; gh auth login --token \'abcd1234efgh\'',
     f'docker login -u ci --password "{R}" x; gh auth login --token \'{R}\''),
    ('{"command": "curl -u \\"admin:Hunt3rCurl2\\" x; curl --user=\\"admin:pw3\\" y"}',
     f'{{"command": "curl -u \\"admin:{R}\\" x; curl --user=\\"admin:{R}\\" y"}}'),
    ("curl -sku admin:Hunt3rPass https://x", f"curl -sku admin:{R} https://x"),
    ('{"content": "[db]\\npassword:\\tHunt3rTab4\\n"}', f'{{"content": "[db]\\npassword:\\t{R}\\n"}}'),
    ("tool --api_key X1234567", f"tool --api_key {R}"),
    # Quoted, a flag's value is the whole of it, spaces and all.
    ("gpg --batch --passphrase 'correct horse battery' -c f", f"gpg --batch --passphrase '{R}' -c f"),
    ("mysql -u root -p'my pass word' db; sshpass -p \"my pass word\" ssh h; curl -u 'admin:my pass word' x",
     f"mysql -u root -p'{R}' db; sshpass -p \"{R}\" ssh h; curl -u 'admin:{R}' x"),
    ('{"command": "docker login --password \\"horse battery\\" x"}',
     f'{{"command": "docker login --password \\"{R}\\" x"}}'),
    # As CGI and WSGI name the headers (a debug page, request.META).
    ("{'HTTP_AUTHORIZATION': 'Basic SHVudDNyLWh0dHA2Zm9v', 'HTTP_COOKIE': 'sessionid=abc123def456'}",
     f"{{'HTTP_AUTHORIZATION': 'Basic {R}', 'HTTP_COOKIE': '{R}'}}"),
    # A CGI process's environment, dumped (env, printenv): "=", quoted or not.
    ("HTTP_COOKIE=sessionid=abc123def456; csrftoken=x9\nHTTP_HOST=example.com",
     f"HTTP_COOKIE={R}\nHTTP_HOST=example.com"),
    # Headers as curl -w '%{header_json}' and Node write them: each cookie of the array.
    ('{"set-cookie": ["sid=abc123def456; Path=/; HttpOnly", "theme=dark"], "server": "nginx"}',
     f'{{"set-cookie": ["{R}", "{R}"], "server": "nginx"}}'),
    ('{"Cookie":["sid=abc123def456"]}', f'{{"Cookie":["{R}"]}}'),
    # A quoted cookie value (RFC 6265) is the string's own quote, escaped: the cookie goes on after it.
    ('{"set-cookie": ["sid=\\"abc123def456\\"; Path=/", "theme=dark"]}', f'{{"set-cookie": ["{R}", "{R}"]}}'),
    ('{"c": "{\\"set-cookie\\": [\\"sid=\\\\\\"abc123def456\\\\\\"\\", \\"x=y\\"]}"}',
     f'{{"c": "{{\\"set-cookie\\": [\\"{R}\\", \\"{R}\\"]}}"}}'),
    # A bracket that is the header value's own text, not JSON's.
    ("Cookie: [sid=abc123def456]", f"Cookie: {R}"),
    ("Set-Cookie: {sid}=abc123def456; Path=/", f"Set-Cookie: {R}"),
    ('export HTTP_COOKIE="sid=abc123def456" HTTP_AUTHORIZATION=Basic SHVudDNyLWh0dHA2Zm9v',
     f'export HTTP_COOKIE="{R}" HTTP_AUTHORIZATION=Basic {R}'),
    ('Authorization: Digest username="bob", nonce="abc", uri="/", response="6629fae49393a05397450978507c4ef1"',
     f'Authorization: Digest username="bob", nonce="abc", uri="/", response="{R}"'),
    # Brackets inside a value (a generated password) are the value's; one that ends it is not.
    ("password=Xy9]kLm2pQ7 DB_PASSWORD=ab}cdefgh123 token: abc]defghijk", f"password={R} DB_PASSWORD={R} token: {R}"),
    ('{"a": "x password=abc12345}"} ${TOKEN:-d3fault}', f'{{"a": "x password={R}}}"}} ${{TOKEN:{R}}}'),
    # Quoted, a flag's value may start with anything but what ends it.
    ("mysql -u root -p\"{Secr3t}\" db; sshpass -p '[Secr3tPw' ssh h; sshpass -p :Secr3tPw2 ssh h",
     f"mysql -u root -p\"{R}\" db; sshpass -p '{R}' ssh h; sshpass -p {R} ssh h"),
    ("--password ]abc12345 and Cookie: ;sid=abc", f"--password {R} and Cookie: {R}"),
    # Go's JSON encoder writes <, > and & as \u escapes, and ASCII JSON a non-ASCII letter.
    ('"DB_PASSWORD=ab\\u003cHunt3rLtGt3\\u003e", "password": "p\\u00e4ssw0rd"', f'"DB_PASSWORD={R}", "password": "{R}"'),
    ("<data>\\u003eAKIAIOSFODNN7EXAMPLE\\u003c/data>", f"<data>\\u003e{R}\\u003c/data>"),
    # A token after a line break escaped twice: a tool's JSON output in a raw line.
    ('"{\\"note\\": \\"rotated\\\\nghp_' + "a1B2" * 9 + '\\"}"', f'"{{\\"note\\": \\"rotated\\\\n{R}\\"}}"'),
    # A key cut short, through PGP's armor headers and the line numbers of a file the CLI read.
    ("-----BEGIN PGP PRIVATE KEY BLOCK-----\nVersion: GnuPG v2.0.22 (GNU/Linux)\n\nlQOYBFabcsecret\n", R),
    ("     1\u2192-----BEGIN OPENSSH PRIVATE KEY-----\n     2\u2192b3BlbnNzaC1rZXk\n     3\u2192c2VjcmV0\n",
     f"     1\u2192{R}"),
]

# Near misses: each looks a little like a secret and must stay as it is.
LEFT_ALONE = [
    "Bearer authentication failed.",
    "The bearer of bad news",
    "Authorization: denied for user bob",
    "sk-learn-compatible-estimators-here",
    "task-1234 and disk-usage-report-for-today",
    "gh_pages branch; ghp_short",
    "AKIA1234 is too short, AKIAIOSFODNN7EXAMPLEXX too long",
    "eyJhbGciOiJIUzI1NiJ9 alone is only a header",
    "-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE\n-----END PUBLIC KEY-----",
    "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIUX\n-----END CERTIFICATE-----",
    "password is required; the password field is empty",
    'password="" and token=',
    "password=$DB_PASSWORD token: **** secret=${VAULT_SECRET}",
    "password=$db_password secret=$(cat /run/secrets/x) token=${API_TOKEN}",
    "max_tokens: 4096, token_count=5, tokens=12, password_min_length=8",
    "https://example.com:8080/path and ssh://git@github.com/o/r",
    "user@example.com wrote: see http://host/a:b@c",
    "mysql --password-file /etc/pw --token-ttl 60",
    "bypass=true compass: north mypass=x pass=x db_pass=x",
    "PWD=/root OLDPWD=/home/x pwd: ~/src PWD=. TESTS_PASS=12 DB_PASS=$DB_PASSWORD",
    "tests pass: 12 fail: 0",
    "--- PASS: TestFoo (0.00s)\nPASS: tests/test_a.sh\nok  \tpkg\t0.01s",
    '{"pass": true, "check_pass": "healthy", "Pass": false} gc pass=full status_pass=green',
    "mysql -P3306 -p -h db && mysql --port 3306 && echo x | grep -p",
    "journalctl -u mysql -p3; journalctl -u mariadb -perr; ps -u mysql -p12345; top -u mysql -p1234",
    "docker run --name mysql -p3306:3306 mysql:8 && mysql -h db -p$MYSQL_PWD",
    "docker run -u 1000:1000 img && sudo -u postgres:postgres psql",
    "sshpass -f /etc/pw ssh host && sshpass -e ssh host",
    # -p is a port in most commands, and in redis-cli's; --port is mongo's.
    "docker run -p 8080:80 nginx && ssh -p 2222 host && redis-cli -p 6379 ping && mongo --port 27017 admin",
    "docker run -d --name mongo -p 27017:27017 mongo:7; journalctl -u mongod -p err; kubectl logs mongo-0 -p",
    "mongosh -u admin -p --port 27017; docker login -u ci --password-stdin r.io; redis-cli --askpass -p 6380",
    "ldapsearch -x -W -D cn=admin -y /etc/ldap.pw -s sub; ldapmodify -fnew.ldif -Hldap://www.ex; ldappasswd -A -S",
    "docker login -u ci -p $CI_REGISTRY_PASSWORD r.io; redis-cli -a \"$REDIS_PASSWORD\"; ldapsearch -w ${LDAP_PW}",
    "smbclient //fs/share -U bob -N; smbclient -U% -L fs; rpcclient --user=CORP\\bob dc",
    "ipmitool -I lanplus -H bmc -U admin -E -p 623 power status; ipmitool -H bmc -U admin -P \"$IPMI_PW\" -K -Y sel list",
    "ipmitool -H bmc -U admin -f /root/ipmi.pw sdr; racadm -r idrac -u root -p $IDRAC_PW getsysinfo",
    "snmpwalk -v3 -u mon -l authPriv -a SHA -x AES host; snmpwalk -v2c -c \"$COMMUNITY\" host; snmpget -v 2c -c $RO h",
    "snmpd -c /etc/snmp/snmpd.conf; snmptrapd -c /etc/snmp/snmptrapd.conf -f; snmptable -v2c -Cf , -Cw 80 h ifTable",
    # A lower-case word alone is an _AUTH variable's mode.
    "SMTP_AUTH=login LDAP_AUTH=simple NGINX_AUTH=off REDISCLI_AUTH=$REDIS_PW HTPASSWD_AUTH=/etc/h RETRY_AUTH=3 X_AUTH=true",
    "htpasswd -c /etc/nginx/.htpasswd admin; htpasswd -D /etc/h bob; htpasswd -nb admin \"$HT_PW\"; cat .htpasswd",
    "hydra -l admin -P /usr/share/wordlists/rockyou.txt ssh://h; evil-winrm -i h -u a -p $WINRM_PW -P 5985",
    "docker run -d --name acme -p 8443:443 acme/server; lftp -u admin ftp.example.com; lftp -p 2121 host",
    "xfreerdp /u:admin /v:host /port:3389 +clipboard; xfreerdp /u:a /p:$RDP_PW /v:h",
    "mc ls myminio/bucket; mc alias set local http://127.0.0.1:9000 \"$MINIO_ROOT_USER\" \"$MINIO_ROOT_PASSWORD\"; mc alias list",
    "ipmitool -H bmc -U admin -E user list 1; ipmitool user set password 2 \"$PW\" 16; ipmitool user set name 2 bob",
    "racadm get iDRAC.Users.2.UserName; racadm set iDRAC.Users.2.Password ${IDRAC_NEW}; "
    "racadm set iDRAC.Users.2.Privilege 0x1ff",
    # Which ask for the keys: mc alias set NAME URL, its options not counted as words.
    "mc admin user list myminio; mc alias set local http://127.0.0.1:9000; mc alias set local http://h --api S3v4",
    "mc alias set --api s3v4 local http://h; mc admin user add myminio bob \"$BOB_SECRET\"",
    "xfreerdp /u:admin /v:host; xfreerdp /u:a /gp:$GW_PW /pth:${NT_HASH} /v:h",
    "nxc smb h -u a -H \"$HASH\" --local-auth; evil-winrm -i h -u a -H $NT_HASH",
    "snmpget -v3 -u mon -l authPriv -3m $AUTH_KEY -3k ${KEY} h; snmpusm -v3 h passwd -Ca \"$OLD\" \"$NEW\" bob",
    "- name: SMTP_AUTH\n  value: login\n- name: REDISCLI_AUTH\n  value: $(REDIS_PW)\n- name: smtp_auth\n  value: x1",
    # A name/value pair whose name is no secret's, or whose value is given elsewhere.
    "- name: LOG_LEVEL\n  value: debug\n- name: DB_PASSWORD_FILE\n  value: /run/secrets/db\n"
    "- name: TESTS_PASS\n  value: 12",
    '{"name": "LOG_LEVEL", "value": "debug"}, {"name": "DB_PASSWORD", "valueFrom": {"secretKeyRef": {"name": "db"}}}',
    "- name: password_min_length\n  value: 8\n- name: API_TOKEN\n  value: $(API_TOKEN)\n"
    "- name: DB_PASSWORD\n\n  value: x",
    "- name: API_KEY\n  value: |-\n    not-read-here",
    "define('DB_HOST', 'db.internal'); define('DB_PASSWORD', getenv('DB_PASSWORD')); define('API_KEY', '');",
    "cookie-jar: /tmp/c.txt and curl --cookie-jar /tmp/c x",
    # No value: null says the key is unset.
    '{"api_key": null, "password": false, "secret": true}',
    # A string's end is no value: the JSON after it stays (a raw line stays valid).
    '{"command": "mysql -h db -u root -p", "description": "asks"}',
    '{"command": "grep -i set-cookie:", "text": "The login page sends no Set-Cookie:"}',
]


@pytest.fixture(scope="module")
def redactor():
    return Redactor(["s3cr3t-VALUE-xyz", 'quo"te\\slash-secret', "shortone"[:MIN_SECRET_LENGTH - 1]])


@pytest.mark.parametrize("raw, expected", CAUGHT, ids=[c[0][:30] for c in CAUGHT])
def test_each_credential_shape_is_redacted(redactor, raw, expected):
    assert redactor.redact(raw) == expected


@pytest.mark.parametrize("raw", LEFT_ALONE, ids=[c[:30] for c in LEFT_ALONE])
def test_near_misses_are_left_alone(redactor, raw):
    assert redactor.redact(raw) == raw


def test_secret_values_are_redacted_wherever_they_stand(redactor):
    assert redactor.redact("x=s3cr3t-VALUE-xyz;s3cr3t-VALUE-xyzs3cr3t-VALUE-xyz") == f"x={R};{R}"
    assert redactor.redact('a quo"te\\slash-secret b') == f"a {R} b"
    # Shorter than the minimum: ordinary text would be destroyed.
    assert redactor.redact("shorton and short") == "shorton and short"
    assert redactor.secret_count == 2


def test_every_match_of_a_shape_holds_one_of_its_hints():
    """A shape runs only on a text holding one of its hints: each hint it
    could match without would be a secret let through."""
    for rule in SHAPES:
        unhinted = dataclasses.replace(rule, hints=())
        for raw, _ in CAUGHT:
            subject = raw.lower() if rule.fold_case else raw
            for start, end in unhinted.matches(raw, subject):
                assert any(hint in subject for hint in rule.hints), (rule.name, raw)


def test_a_status_page_naming_paths_and_keys_holds_no_hint(redactor):
    """Tool output is mostly status pages and logs: a hint only as wide as
    its shape needs ("key", not "api" for --api-key) keeps them off every rule."""
    page = "slow request: GET /api/items took 2.31s\nretrying upstream (attempt 2)\n"
    assert redactor.gate.search(page) is None
    assert redactor.redact(page) == page


def test_a_manifest_and_commands_naming_no_secret_hold_no_hint(redactor):
    """A name/value pair is gated by what a secret's name holds, not by
    "name" or "value", and a client's flag by the client's name: an
    environment list of ordinary names and ports given with -p reach no rule,
    nor does a daemon of a client's family (snmpd), acme's name (which holds
    "cme"), a host's address (not mc's "config host add") or a user added
    (not mc's "admin user add ")."""
    text = ('env:\n- name: LOG_LEVEL\n  value: debug\n- name: PORT\n  value: "8080"\n'
            "docker run -p 8080:80 nginx; ssh -p 2222 host\n"
            "snmpd[812]: Connection from UDP: [10.0.0.5]:161\nacme: renewed example.org; host address 10.0.0.7\n"
            "useradd[901]: admin user added to group wheel\n")
    assert redactor.gate.search(text) is None
    assert redactor.redact(text) == text


def test_secrets_of_any_characters_are_found_past_the_gate():
    """The gate that lets most texts through untouched never lets a secret
    through: values with spaces, regex characters and letters whose case
    folds oddly, in any case for the shapes, and in a text RE2 cannot read
    (a lone surrogate, as an escaped half pair decodes to)."""
    odd = ["pass word (x)*?", "İstanbul-Kelvin-K", "tab\there|[0-9]+"]
    redactor = Redactor(odd)
    for secret in odd:
        assert redactor.redact(f"before {secret} after") == f"before {R} after"
    assert redactor.redact("AUTHORIZATION: BEARER abcDEF123456789xyz") == f"AUTHORIZATION: BEARER {R}"
    lone = "\ud800 \udfff"
    assert redactor.redact(f"{lone} password=hunter22") == f"{lone} password={R}"
    assert redactor.redact("a status page with nothing to hide\n" * 50) == "a status page with nothing to hide\n" * 50


def test_redaction_is_idempotent(redactor):
    for raw, _ in CAUGHT:
        once = redactor.redact(raw)
        assert redactor.redact(once) == once


@pytest.mark.parametrize("raw, _", CAUGHT + [('a quo"te\\slash-secret b', None), ("s3cr3t-VALUE-xyz", None)],
                         ids=[c[0][:30] for c in CAUGHT] + ["quoted secret", "secret"])
def test_a_raw_stream_json_line_stays_valid_json(redactor, raw, _):
    for ensure_ascii in (True, False):
        line = json.dumps({"type": "user", "message": {"content": [{"type": "tool_result", "content": raw}]}},
                          ensure_ascii=ensure_ascii)
        redacted = redactor.redact(line)
        decoded = json.loads(redacted)["message"]["content"][0]["content"]
        # What the line holds, redacted raw, is what the text is, redacted decoded.
        assert decoded == redactor.redact(raw)


def redacted_in_line(redactor, text: str, depth: int) -> str:
    """``text`` as a tool's JSON output kept ``depth`` times in the CLI's
    line (each time as a JSON string), redacted there, and read back out."""
    for _ in range(depth):
        text = json.dumps({"content": text})
    redacted = redactor.redact(text)
    for _ in range(depth):
        redacted = json.loads(redacted)["content"]
    return redacted


@pytest.mark.parametrize("value, shown", [
    (12345678, R), (-1.5e3, R), (None, None), (True, True), (["sid=abc123def456", "b=1"], [R, R]),
], ids=["number", "float", "null", "true", "array"])
def test_a_json_value_that_is_no_string_leaves_the_json_valid(redactor, value, shown):
    """A secret's name as a JSON key whose value is no string (a structured
    tool input in a raw line, a tool's JSON output, that kept in a string):
    a number is redacted as a string, a literal, which holds none, kept, and
    the JSON after it left whole, at any depth."""
    scalar = not isinstance(value, list)
    document = {"input": {"headers": {"Cookie": value}, "password": value if scalar else 12345678}, "n": 1}
    for text in (json.dumps(document), json.dumps(document, separators=(",", ":"))):
        for depth in range(3):
            redacted = redacted_in_line(redactor, text, depth)
            inner = json.loads(redacted)
            assert inner["n"] == 1 and "abc123def456" not in redacted and "12345678" not in redacted, redacted
            assert inner["input"]["headers"]["Cookie"] == shown
            assert inner["input"]["password"] == (shown if scalar else R)


@pytest.mark.parametrize("raw", [": ghp_" + "a1B2" * 9 + " x", ":AKIAIOSFODNN7EXAMPLE", ": s3cr3t-VALUE-xyz"])
def test_a_string_that_begins_with_a_colon_before_a_secret_stays_a_string(redactor, raw):
    """Its opening quote and the colon look like a key's end and its colon:
    a replacement quoted there would end the string, and the line would be
    no JSON."""
    for document in ({"t": raw, "n": 1}, [raw, raw], {"a": [raw]}, raw, {"": 1, "b": raw}):
        for indent in (None, 0, 2):
            for depth in range(3):
                redacted = redacted_in_line(redactor, json.dumps(document, indent=indent), depth)
                assert "a1B2" not in redacted and "AKIA" not in redacted and "VALUE" not in redacted
                assert json.dumps(json.loads(redacted)) == json.dumps(document).replace(raw, redactor.redact(raw))
    # A quote right after a quote of its own depth closes the empty key: its value is quoted.
    assert json.loads(Redactor(["12345678"]).redact(json.dumps({"": 12345678}))) == {"": R}


@pytest.mark.parametrize("text", ['{"cookie": []}', '{"Cookie": [1, 2]}', '{"cookie": {}}', '{"cookie":[\n]}'])
def test_a_cookie_key_whose_json_value_holds_no_string_is_left_as_it_is(redactor, text):
    """Its bracket alone replaced, the JSON would be no JSON."""
    assert redactor.redact(text) == text


def test_a_secret_value_is_found_as_go_and_json_inside_json_write_it(redactor):
    """A tool that prints JSON escapes the value once (Go's encoder writes
    & < > as \\u escapes too); the CLI's line escapes that text again."""
    go_redactor = Redactor(["Pa&ss<w>rd1234"])
    printed = 'docker inspect db: {"Env": ["DB_PASSWORD=Pa\\u0026ss\\u003cw\\u003erd1234"]}'
    assert go_redactor.redact(printed) == f'docker inspect db: {{"Env": ["DB_PASSWORD={R}"]}}'
    for secret_redactor, value, tail in ((go_redactor, "Pa&ss<w>rd1234", "rd1234"),
                                         (redactor, 'quo"te\\slash-secret', "slash-secret")):
        output = json.dumps({"Env": [f"APP_KEY={value}"]})
        if secret_redactor is go_redactor:
            output = output.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")
        for ensure_ascii in (True, False):
            line = json.dumps({"type": "user", "message": {"content": [{"type": "tool_result", "content": output}]}},
                              ensure_ascii=ensure_ascii)
            redacted = secret_redactor.redact(line)
            assert tail not in redacted
            decoded = json.loads(redacted)["message"]["content"][0]["content"]
            assert json.loads(decoded) == {"Env": [f"APP_KEY={R}"]}
            assert decoded == secret_redactor.redact(output)


def test_an_environment_list_stays_valid_json_at_any_depth(redactor):
    """kubectl -o json and an ECS task definition, as a tool prints them and
    kept in the CLI's line: each secret-named variable's value, a string or
    a number, is replaced, and the JSON stays JSON."""
    document = {"env": [{"name": "LOG_LEVEL", "value": "debug"}, {"name": "DB_PASSWORD", "value": "Env Pw 1"},
                        {"name": "API_TOKEN", "value": 12345678}, {"name": "DB_PASS", "value": "/run/pw"}]}
    expected = {"env": [{"name": "LOG_LEVEL", "value": "debug"}, {"name": "DB_PASSWORD", "value": R},
                        {"name": "API_TOKEN", "value": R}, {"name": "DB_PASS", "value": "/run/pw"}]}
    for indent in (None, 4):
        for depth in range(3):
            redacted = redacted_in_line(redactor, json.dumps(document, indent=indent), depth)
            assert json.loads(redacted) == expected, (indent, depth)


def test_a_private_key_with_json_escaped_newlines_is_redacted_whole(redactor):
    line = json.dumps({"content": f"cat id_rsa\n{PEM}\n$ "})
    assert "\\n" in line and "MIIE" in line
    redacted = redactor.redact(line)
    assert json.loads(redacted) == {"content": f"cat id_rsa\n{R}\n$ "}


# Parts of the secrets in CAUGHT that no near miss contains. Not a client's
# password in the command a piece begins with: joined to the piece before
# (-H x"curl -u …), its program's name is that option's value.
SECRET_PARTS = ("s3cr3t-VALUE-xyz", "wJalrXUtnFEMI", "MIIEpAIBAAKC", "hunter2", "dXNlcjpw", "p4ss", "b3BlbnNz",
                "lQOYBF", "Z9y8Z9y8", "AbCdEfGh", "a1B2a1B2", "abcDEF123", "0987654321", "dozjgNry", "ghp_tok",
                "horse battery", "dev-key-123", "K8sS3cret", "Sh3llPw", "Bash3dPw", "redis pw",
                "S3cretRedis2", "M0ngoDump", "P0dman", "D0ckerLong", "LdapJoined", "LdapS3cret2", "B1ndPw", "0ldPw123",
                "N3wPw456", "RpcS3cret", "SmbS3cretQ", "SmbmapPw", "K8sEnvPw", "K8s quoted", "K8sJsonPw", "wJalrK8s",
                "K8sFlowPw", "K8sReadPw", "Php S3cret", "PhpTok3n", "N3xtLine", "Ipm1Joined", "Kg1Key4", "0a1b2c3d4e",
                "Rac4dmPw", "Snmp7Comm", "Snmp8Comm", "R3disAuth1", "B4sicPw", "Http4uth", "Htp4Sh", "lftp pass",
                "Hydr4Pw", "N3texecPw", "Cr4ckPw", "Cme5Pw", "Ev1l winrm", "rdp quoted", "Wl4Rdp", "Sdl4Rdp",
                "Mc old secret", "Ipm1User", "Rac set q", "Rac0ldCfg", "RacCfg2", "Rac json", "Min10Api", "MidSecret",
                "31d6cfe0d16ae931", "e19ccf75ee54e06b", "Usm4uthPw", "Usm0ldPw", "UsmN3wPw", "R3disK8sAuth",
                "B4sicJs0n")


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([raw for raw, _ in CAUGHT] + LEFT_ALONE
                                          + ["s3cr3t-VALUE-xyz", '"', "\\", "é", "\u2028", "=", ":", "@", "token="]),
                          st.sampled_from([" ", "\n", "\t", ", ", '"', "'", "\r\n", "|"])), max_size=10))
def test_any_mix_of_secrets_and_text_leaves_json_valid_and_no_secret(pieces):
    redactor = Redactor(["s3cr3t-VALUE-xyz"])
    raw = "".join(piece + separator for piece, separator in pieces)
    for ensure_ascii in (True, False):
        redacted = redactor.redact(json.dumps({"t": raw, "list": [raw, 1]}, ensure_ascii=ensure_ascii))
        assert json.loads(redacted)["list"][1] == 1
        assert not [part for part in SECRET_PARTS if part in redacted]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.none(), st.text(max_size=40),
                          st.lists(st.sampled_from([raw for raw, _ in CAUGHT] + LEFT_ALONE
                                                   + ["s3cr3t-VALUE-xyz", "\x00", "\ud800", "é", " "]),
                                   max_size=4).map(" ".join)), max_size=12))
def test_a_batch_is_redacted_as_each_of_its_texts_alone(texts):
    """One gate scan for a whole batch finds what a scan of each text would:
    a hint at a text's very start or end, texts holding NUL, empty ones, and
    a batch with a lone surrogate somewhere."""
    redactor = Redactor(["s3cr3t-VALUE-xyz"])
    assert redactor.redact_many(texts) == [redactor.redact(text) for text in texts]


def test_a_token_at_the_start_of_an_escaped_line_is_redacted(redactor):
    line = json.dumps({"content": "ok\nghp_" + "a1B2" * 9 + "\n\tAKIAIOSFODNN7EXAMPLE\nBearer abc123456789"})
    assert json.loads(redactor.redact(line)) == {"content": f"ok\n{R}\n\t{R}\nBearer {R}"}


def test_bytes_that_are_not_utf8_pass_through():
    redactor = Redactor(["s3cr3t-VALUE-xyz"])
    data = b"\xff\xfe token=abc \xc3"
    assert redactor.redact_bytes(data) == b"\xff\xfe token=" + R.encode() + b" \xc3"
    assert redactor.redact_bytes(b"nothing here") == b"nothing here"


# --- configuration -----------------------------------------------------------

def test_secret_environment_values_by_name_and_pattern():
    environ = {"ANTHROPIC_API_KEY": "sk-ant-key-value-1", "GITHUB_TOKEN": "gh-token-value", "db_password": "pw-value-long",
               "HOME": "/home/operator", "LANG": "C.UTF-8", "SHORT_TOKEN": "abc", "MYSQL_ROOT_PASS": "root-pass-value",
               "CACHE_BYPASS": "yes-please", "PGPASSWORD": "pg-password-1", "BORG_PASSPHRASE": "borg-phrase-1"}
    patterns = load_settings(environ={})["CLAUDEOPS_REDACT_ENV"]
    assert sorted(secret_env_values(patterns, environ)) == ["abc", "borg-phrase-1", "gh-token-value", "pg-password-1",
                                                            "pw-value-long", "root-pass-value", "sk-ant-key-value-1"]
    assert secret_env_values(["HOME"], environ) == ["/home/operator"]
    redactor = build({"CLAUDEOPS_REDACT_ENV": patterns}, (), environ)
    assert redactor.redact("abc gh-token-value /home/operator") == f"abc {R} /home/operator"


def test_settings_declared_secret_and_the_cookie_key_are_redacted(tmp_path, monkeypatch):
    monkeypatch.setenv("SOME_SERVICE_PASSWORD", "from-the-environment")
    app = make_app(tmp_path, CLAUDEOPS_SECRET_KEY="cookie-signing-key-1")
    redactor = app.extensions["claudeops.redactor"]
    assert redactor.redact("cookie-signing-key-1 from-the-environment") == f"{R} {R}"


def test_the_database_password_is_redacted_wherever_it_stands():
    """The agent's environment holds CLAUDEOPS_DATABASE_URL: the password
    it reads out of it is the service's own secret, not a bare word."""
    config = {"SQLALCHEMY_DATABASE_URI": "postgresql+psycopg://ops:db%2Fpass-word-1@db.example/claudeops"
                                         "?sslpassword=client-key-phrase"}
    redactor = build(config, (), {})
    assert (redactor.redact("the password is db/pass-word-1, db%2Fpass-word-1 encoded; client-key-phrase")
            == f"the password is {R}, {R} encoded; {R}")
    assert build({"SQLALCHEMY_DATABASE_URI": "sqlite:////srv/state/claudeops.db"}, (), {}).secret_count == 0


def test_the_database_password_is_redacted_as_the_url_spells_it():
    """Percent-encoding is no one spelling: the URL in the agent's
    environment is the one the operator wrote, whatever the service opens,
    and a program reading it (urlsplit(url).password) prints it so."""
    written = "postgresql://ops:p%40ss!w%2aord-1@db.example/claudeops?sslpassword=key+phrase%2B1"
    redactor = build({"SQLALCHEMY_DATABASE_URI": service_url(written), "CLAUDEOPS_DATABASE_URL": written}, (), {})
    assert urlsplit(written).password == "p%40ss!w%2aord-1"
    assert (redactor.redact("p%40ss!w%2aord-1 key+phrase%2B1 p@ss!w*ord-1 key phrase+1")
            == f"{R} {R} {R} {R}")


def test_redact_env_setting_is_validated():
    assert load_settings(environ={"CLAUDEOPS_REDACT_ENV": " MY_KEY , *_PW ,"})["CLAUDEOPS_REDACT_ENV"] == ["MY_KEY", "*_PW"]
    with pytest.raises(ConfigError, match=r"CLAUDEOPS_REDACT_ENV='MY KEY': 'MY KEY' is not a variable name"):
        load_settings(environ={"CLAUDEOPS_REDACT_ENV": "MY KEY"})
    for empty in ("", " , ", ","):   # it would redact no variable by value
        with pytest.raises(ConfigError, match="CLAUDEOPS_REDACT_ENV"):
            load_settings(environ={"CLAUDEOPS_REDACT_ENV": empty})


# --- the run log, written as the bytes arrive --------------------------------

class Sink:
    def __init__(self):
        self.data = bytearray()

    def write(self, data):
        self.data += data

    def flush(self):
        pass


def write_in_chunks(redactor, data: bytes, sizes) -> bytes:
    sink = Sink()
    log = RedactedLog(sink, redactor)
    position = 0
    for size in sizes:
        log.write(data[position:position + size])
        position += size
    log.write(data[position:])
    log.close()
    return bytes(sink.data)


def test_run_log_cut_anywhere_is_redacted_as_a_whole():
    redactor = Redactor(["s3cr3t-VALUE-xyz"])
    lines = [json.dumps({"t": f"key s3cr3t-VALUE-xyz and {PEM}"}), "password=hunter2", json.dumps({"jwt": JWT}),
             "plain text"]
    data = ("\n".join(lines) + "\nno newline at the end token=abc").encode()
    expected = redactor.redact_bytes(data)
    for cut in range(1, len(data)):
        assert write_in_chunks(redactor, data, [cut]) == expected, cut
    rng = random.Random(7)
    for _ in range(50):
        assert write_in_chunks(redactor, data, [rng.randint(1, 40) for _ in range(40)]) == expected


def test_a_key_block_arriving_line_by_line_is_held_until_it_ends():
    """Plain text (stderr): the block spans lines that arrive one by one."""
    redactor = Redactor()
    sink = Sink()
    log = RedactedLog(sink, redactor)
    log.write(b"before\n")
    for line in PEM.encode().splitlines(keepends=True):
        log.write(line)
        assert b"MIIE" not in sink.data and b"d6QO" not in sink.data
    log.write(b"\nafter\n")
    log.close()
    assert bytes(sink.data) == f"before\n{R}\nafter\n".encode()


@pytest.mark.parametrize("named, value", [("password=", "Hunt3rCutLeak"), ("Authorization: Basic ", "SHVudDNyLWh0dHA2"),
                                          ("mysql -u root -p", "Hunt3rCutLeak")])
def test_a_long_line_cut_between_a_value_and_what_names_it_is_redacted(monkeypatch, named, value):
    monkeypatch.setattr(runlog, "HOLD_CHARS", 200)
    monkeypatch.setattr(runlog, "OVERLAP_CHARS", 60)
    redactor = Redactor()
    for at in range(len(named) + 1):   # the cut at each character of the name, and just after it
        data = "x" * 250 + " " + named + value + " " + "y" * (60 + at - len(named) - len(value) - 1)
        assert len(data) - 60 == 251 + at
        sink = Sink()
        log = RedactedLog(sink, redactor)
        log.write(data.encode())
        assert bytes(log.pending).decode() == (named + value)[at:] + data[251 + len(named) + len(value):]   # cut there
        log.write(b" and more\n")
        log.close()
        assert bytes(sink.data).decode() == redactor.redact(data + " and more\n"), at
        assert value not in bytes(sink.data).decode()


def test_a_line_longer_than_the_hold_is_written_in_pieces_never_splitting_a_secret(monkeypatch):
    monkeypatch.setattr(runlog, "HOLD_CHARS", 200)
    monkeypatch.setattr(runlog, "OVERLAP_CHARS", 60)
    redactor = Redactor(["s3cr3t-VALUE-xyz"])
    data = ("x" * 150 + " s3cr3t-VALUE-xyz " + "y" * 170 + f" token={'t' * 30} " + "z" * 300
            + " s3cr3t-VALUE-xyz\n").encode()
    for size in (1, 7, 64, 199, 250):
        sink = Sink()
        log = RedactedLog(sink, redactor)
        for start in range(0, len(data), size):
            log.write(data[start:start + size])
            assert len(log.pending) <= 200 + size   # never held whole
        log.close()
        assert bytes(sink.data) == redactor.redact_bytes(data), size


# --- the database ------------------------------------------------------------

def test_every_text_written_through_the_orm_is_redacted(tmp_path, monkeypatch):
    monkeypatch.setenv("MAIL_PASSWORD", "mail-secret-value")
    app = make_app(tmp_path)
    with app.app_context():
        session = Session(tier=1, trigger="api", prompt="use mail-secret-value please")
        db.session.add(session)
        db.session.commit()
        db.session.add(SessionActivity(session_id=session.id, kind="tool_result", title="token=abc",
                                       body=f"out: {JWT}"))
        session.response = "password=hunter2"
        db.session.commit()
        rows = db.session.execute(text("SELECT prompt, response FROM sessions")).all()
        assert rows == [(f"use {R} please", f"password={R}")]
        assert db.session.execute(text("SELECT title, body FROM session_activity")).all() == [
            (f"token={R}", f"out: {R}")]
        # The object in hand holds what was stored.
        assert session.prompt == f"use {R} please"


def test_a_notice_is_redacted_though_it_is_written_with_the_batch_not_by_the_orm(tmp_path, monkeypatch):
    monkeypatch.setenv("MAIL_PASSWORD", "mail-secret-value")
    app = make_app(tmp_path)
    with app.app_context():
        app.extensions["claudeops.plugins"].hook.claudeops_notice(
            level="warning", service="mail", run=None, message="login failed with mail-secret-value, password=hunter2")
        db.session.commit()
        assert db.session.execute(text("SELECT message FROM events")).scalars().all() == [
            f"login failed with {R}, password={R}"]


def test_a_long_notice_is_redacted_before_it_is_cut_to_the_column(tmp_path, monkeypatch):
    """A notice is kept to its first 2,000 characters; a secret the cut runs
    through is redacted whole, not stored by its first half."""
    monkeypatch.setenv("MAIL_PASSWORD", "mail-secret-value")
    app = make_app(tmp_path)
    with app.app_context():
        message = "x" * 1990 + " mail-secret-value"
        app.extensions["claudeops.plugins"].hook.claudeops_notice(level="warning", service="mail", run=None,
                                                                  message=message)
        db.session.commit()
        [stored] = db.session.execute(text("SELECT message FROM events")).scalars().all()
        assert stored.startswith("x" * 1990) and "mail-sec" not in stored


# --- cost --------------------------------------------------------------------

def test_cost_per_line_of_recorded_streams():
    """``bin/test tests/test_redaction.py -k cost -s`` prints what docs/security.md quotes:
    every line of the recorded CLI streams, redacted as the run log writer does."""
    import time
    from tests.conftest import FIXTURES
    redactor = build({"CLAUDEOPS_REDACT_ENV": ["*_TOKEN", "*_PASSWORD", "ANTHROPIC_API_KEY"]}, (), {
        "ANTHROPIC_API_KEY": "sk-ant-api03-" + "x" * 80, "GITHUB_TOKEN": "ghp_" + "y" * 36,
        "DB_PASSWORD": "correct-horse-battery", "SLACK_TOKEN": "xoxb-1234-5678-abcdef"})
    lines = [line for path in sorted(FIXTURES.glob("*.ndjson")) for line in path.read_bytes().splitlines()]
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        for line in lines:
            redactor.redact_bytes(line)
        best = min(best, time.perf_counter() - started)
    size = sum(map(len, lines))
    per_line = best / len(lines) * 1e6
    long_line = json.dumps(sl.tool_result("log line 12345, all well\n" * 40_000)).encode()
    started = time.perf_counter()
    redactor.redact_bytes(long_line)
    long_seconds = time.perf_counter() - started
    # Crafted: key headers with no footer, each once looked 64 KiB ahead for one.
    headers = json.dumps(sl.tool_result(("-----BEGIN RSA PRIVATE KEY-----" + "x" * 10) * 25_000)).encode()
    started = time.perf_counter()
    redactor.redact_bytes(headers)
    headers_seconds = time.perf_counter() - started
    print(f"\nredaction: {len(lines)} lines, {size / len(lines):.0f} bytes a line on average: "
          f"{per_line:.1f} µs a line, {size / best / 1e6:.1f} MB/s; "
          f"one {len(long_line) / 1e6:.1f} MB line: {long_seconds * 1000:.0f} ms; "
          f"one {len(headers) / 1e6:.1f} MB line of 25,000 private key headers: {headers_seconds * 1000:.0f} ms")
    assert per_line < 2000, "far slower than measured (about 40 µs a line on a loaded 2-core machine)"


def test_many_json_values_that_are_no_strings_on_one_line_cost_no_more_than_one_each(redactor):
    """Each value's token is read within its own span: read on to the line's
    end from each of them, a long line of them took seconds to minutes."""
    import time
    line = '"password":12345678' * 12_000
    started = time.perf_counter()
    redacted = redactor.redact(line)
    assert time.perf_counter() - started < 3
    assert redacted == f'"password":"{R}"' * 12_000


def test_withheld_values_are_found_by_their_digests_alone():
    from app.redaction import WITHHELD_ENV, WithheldValues, build
    description = WithheldValues.describe(["Operator-Pass-2024", "ApiTok3n-abcdefgh", "short", None])
    assert "Operator-Pass-2024" not in description and "ApiTok3n" not in description
    assert len(description.split()) == 3   # the key, then one entry for each value long enough
    hook = build({}, [], environ={WITHHELD_ENV: description}, withheld=True)
    assert hook.redact("docker restart web # Operator-Pass-2024 ApiTok3n-abcdefgh") == f"docker restart web # {R} {R}"
    assert hook.redact("x=Operator-Pass-2024Operator-Pass-2024;") == f"x={R};"   # the two spans merge
    assert hook.redact("Operator-Pass-2023 and ApiTok3n-abcdefgX") == "Operator-Pass-2023 and ApiTok3n-abcdefgX"
    # Another session's key: the same values are other digests.
    assert WithheldValues.describe(["Operator-Pass-2024"]).split()[1] != description.split()[1]


def test_a_malformed_withheld_description_is_ignored_with_a_warning(caplog):
    from app.redaction import WITHHELD_ENV, build
    for broken in ("zz 18:00", "00ff 18", "00ff x:00"):
        assert build({}, [], environ={WITHHELD_ENV: broken}, withheld=True).redact("text Operator-Pass-2024") == "text Operator-Pass-2024"
    assert "CLAUDEOPS_WITHHELD_SECRETS is malformed" in caplog.text


def test_a_cookie_list_cut_short_by_the_end_of_its_string_takes_nothing_past_it(redactor):
    """JSON kept in a string that ends inside a cookie array (a tool's output
    cut short, its last character an escaped backslash): the quote that ends
    the string is not the cookie's, and what follows it is the line's own."""
    line = '{"a": "{\\"cookie\\": [\\"sid=abc\\\\", "b": "notacookie-1234567\\"]}"}'
    assert json.loads(line)["b"] == 'notacookie-1234567"]}'
    assert redactor.redact(line) == line
