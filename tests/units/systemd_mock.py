'''systemd1.Manager mock for tests/units/systemd_manager_test.cc (a local python3-dbusmock template).

Loaded by path: /usr/bin/python3 -m dbusmock --system -t tests/units/systemd_mock.py -l <log>
  [-p '{"unit_dir": "<root>/etc/systemd/system"}']

Self-contained (does not build on the stock `systemd` template, which has no NoSuchUnit errors,
no LoadUnit and only "done" jobs). Units exist once added with the Mock method AddMockUnit(s):

- StartUnit/RestartUnit/StopUnit(ss) -> o (RestartUnit as StartUnit): a job path; JobNew, then JobRemoved(uoss) from an idle callback
  (after the method reply), and ActiveState/SubState flip. Unit names steer the job:
    "fail" in the name:  the start job ends with result "failed" (ActiveState "failed");
    "hang" in the name:  no JobRemoved is ever sent;
    "eager" in the name: JobRemoved is sent *before* the method reply.
  An unknown unit is org.freedesktop.systemd1.NoSuchUnit, as real systemd answers.
- LoadUnit(s) -> o: like real systemd, an unknown name gives a unit with LoadState "not-found".
- GetUnit(s) -> o: NoSuchUnit for unknown units.
- EnableUnitFiles(asbb) -> ba(sss), DisableUnitFiles(asb) -> a(sss), GetUnitFileState(s) -> s; the
  unit's UnitFileState property follows.
- Reload(), Subscribe(), Unsubscribe().
- Units named *.timer also carry org.freedesktop.systemd1.Timer NextElapseUSecRealtime and
  LastTriggerUSec (t, 0 = never); tests set them with Mock.UpdateProperties on the unit object.

Parameter "unit_dir" (a directory, like /etc/systemd/system): unit files are loaded from disk as
real systemd does, at load and at every Reload (daemon-reload). Each *.service / *.timer file
there that is not yet a unit becomes one (as AddMockUnit); a unit loaded from a file whose file
is gone gets LoadState "not-found" (and "loaded" again if the file comes back). With a unit_dir,
EnableUnitFiles of a name without a file fails (org.freedesktop.DBus.Error.FileNotFound), and a
timer loaded from a file, once its start job is done, gets NextElapseUSecRealtime from its
OnCalendar= (forms "[Dow[,Dow...]] *-*-* HH:MM[:SS]", local time; otherwise an hour from now)
unless a test set one; its stop job sets it back to 0.
'''

import datetime
import os
import re
import time

import dbus
from gi.repository import GLib

from dbusmock import MOCK_IFACE, mockobject

BUS_NAME = 'org.freedesktop.systemd1'
MAIN_OBJ = '/org/freedesktop/systemd1'
MAIN_IFACE = 'org.freedesktop.systemd1.Manager'
UNIT_IFACE = 'org.freedesktop.systemd1.Unit'
TIMER_IFACE = 'org.freedesktop.systemd1.Timer'
SYSTEM_BUS = True


def load(mock, parameters):
    mock.next_job_id = 1
    mock.units = {}       # name -> object path, units added with AddMockUnit
    mock.not_found = {}   # name -> object path, unknown names LoadUnit was asked for
    mock.enabled = set()
    mock.reloads = 0
    mock.unit_dir = str(parameters.get('unit_dir', '')) if parameters else ''
    mock.from_files = set()  # units loaded from unit_dir
    mock.AddProperties(MAIN_IFACE, {'Version': '252-mock'})
    _load_unit_files(mock)


def _unit_path(name):
    # systemd's bus_label_escape: [A-Za-z0-9] kept (a leading digit escaped), the rest _xx.
    out = []
    for i, ch in enumerate(name.encode('utf-8')):
        c = chr(ch)
        if (c.isascii() and c.isalpha()) or (c.isdigit() and i > 0):
            out.append(c)
        else:
            out.append(f'_{ch:02x}')
    return f'{MAIN_OBJ}/unit/{"".join(out)}'


def _no_such(name):
    raise dbus.exceptions.DBusException(f'Unit {name} not found.',
                                        name='org.freedesktop.systemd1.NoSuchUnit')


def _unit(mock, name):
    name = str(name)
    if name not in mock.units:
        _no_such(name)
    return mockobject.objects[mock.units[name]]


def _run_job(mock, name, active, sub, result):
    unit = _unit(mock, name)
    job_id = mock.next_job_id
    mock.next_job_id += 1
    job_path = dbus.ObjectPath(f'{MAIN_OBJ}/job/{job_id}')
    name = str(name)
    mock.EmitSignal(MAIN_IFACE, 'JobNew', 'uos', [job_id, job_path, name])

    def finish():
        unit.UpdateProperties(UNIT_IFACE, {'ActiveState': active, 'SubState': sub})
        if result == 'done' and name in mock.from_files and name.endswith('.timer'):
            _update_next_elapse(mock, name, unit, active == 'active')
        mock.EmitSignal(MAIN_IFACE, 'JobRemoved', 'uoss', [job_id, job_path, name, result])
        return False

    if 'hang' in name:
        pass
    elif 'eager' in name:
        finish()
    else:
        GLib.idle_add(finish)
    return job_path


@dbus.service.method(MAIN_IFACE, in_signature='ss', out_signature='o')
def StartUnit(self, name, _mode):
    if 'fail' in str(name):
        return _run_job(self, name, 'failed', 'failed', 'failed')
    return _run_job(self, name, 'active', 'running', 'done')


@dbus.service.method(MAIN_IFACE, in_signature='ss', out_signature='o')
def RestartUnit(self, name, mode):
    return StartUnit(self, name, mode)


@dbus.service.method(MAIN_IFACE, in_signature='ss', out_signature='o')
def StopUnit(self, name, _mode):
    return _run_job(self, name, 'inactive', 'dead', 'done')


@dbus.service.method(MAIN_IFACE, in_signature='s', out_signature='o')
def GetUnit(self, name):
    _unit(self, name)
    return dbus.ObjectPath(self.units[str(name)])


@dbus.service.method(MAIN_IFACE, in_signature='s', out_signature='o')
def LoadUnit(self, name):
    name = str(name)
    if name in self.units:
        return dbus.ObjectPath(self.units[name])
    if name not in self.not_found:
        path = _unit_path(name)
        self.AddObject(path, UNIT_IFACE, {
            'Id': name, 'Names': dbus.Array([name], signature='s'), 'LoadState': 'not-found',
            'ActiveState': 'inactive', 'SubState': 'dead', 'UnitFileState': '',
        }, [])
        self.not_found[name] = path
    return dbus.ObjectPath(self.not_found[name])


def _set_file_state(mock, name, state):
    if name in mock.units:
        mockobject.objects[mock.units[name]].UpdateProperties(UNIT_IFACE, {'UnitFileState': state})


@dbus.service.method(MAIN_IFACE, in_signature='asbb', out_signature='ba(sss)')
def EnableUnitFiles(self, files, _runtime, _force):
    changes = []
    for f in files:
        f = str(f)
        if self.unit_dir and not os.path.isfile(os.path.join(self.unit_dir, f)):
            raise dbus.exceptions.DBusException(f'Unit file {f} does not exist.',
                                                name='org.freedesktop.DBus.Error.FileNotFound')
    for f in files:
        f = str(f)
        if f not in self.enabled:
            self.enabled.add(f)
            changes.append(('symlink', f'/etc/systemd/system/multi-user.target.wants/{f}',
                            f'/etc/systemd/system/{f}'))
        _set_file_state(self, f, 'enabled')
    return (False, dbus.Array(changes, signature='(sss)'))


@dbus.service.method(MAIN_IFACE, in_signature='asb', out_signature='a(sss)')
def DisableUnitFiles(self, files, _runtime):
    changes = []
    for f in files:
        f = str(f)
        if f in self.enabled:
            self.enabled.discard(f)
            changes.append(('unlink', f'/etc/systemd/system/multi-user.target.wants/{f}', ''))
        _set_file_state(self, f, 'disabled')
    return dbus.Array(changes, signature='(sss)')


@dbus.service.method(MAIN_IFACE, in_signature='s', out_signature='s')
def GetUnitFileState(self, name):
    return 'enabled' if str(name) in self.enabled else 'disabled'


@dbus.service.method(MAIN_IFACE, in_signature='', out_signature='')
def Reload(self):
    self.reloads += 1
    _load_unit_files(self)


@dbus.service.method(MAIN_IFACE, in_signature='', out_signature='')
def Subscribe(self):
    pass


@dbus.service.method(MAIN_IFACE, in_signature='', out_signature='')
def Unsubscribe(self):
    pass


@dbus.service.method(MOCK_IFACE, in_signature='s', out_signature='')
def AddMockUnit(self, name):
    _add_unit(self, str(name))


def _add_unit(mock, name):
    path = _unit_path(name)
    mock.AddObject(path, UNIT_IFACE, {
        'Id': name, 'Names': dbus.Array([name], signature='s'), 'LoadState': 'loaded',
        'ActiveState': 'inactive', 'SubState': 'dead',
        'UnitFileState': 'enabled' if name in mock.enabled else 'disabled',
    }, [])
    if name.endswith('.timer'):
        mockobject.objects[path].AddProperties(TIMER_IFACE, {
            'NextElapseUSecRealtime': dbus.UInt64(0), 'LastTriggerUSec': dbus.UInt64(0),
        })
    mock.units[name] = path


def _load_unit_files(mock):
    '''daemon-reload: new unit files become units; units whose file is gone are "not-found".'''
    if not mock.unit_dir:
        return
    try:
        names = set(f for f in os.listdir(mock.unit_dir)
                    if f.endswith(('.service', '.timer'))
                    and os.path.isfile(os.path.join(mock.unit_dir, f)))
    except FileNotFoundError:
        names = set()
    for name in sorted(names):
        if name in mock.units:
            _set_load_state(mock, name, 'loaded')
            continue
        if name in mock.not_found:
            # LoadUnit was asked for it before its file existed: now it is a real unit.
            mock.RemoveObject(mock.not_found.pop(name))
        _add_unit(mock, name)
        mock.from_files.add(name)
    for name in sorted(mock.from_files - names):
        _set_load_state(mock, name, 'not-found')


def _set_load_state(mock, name, state):
    unit = mockobject.objects[mock.units[name]]
    if name in mock.from_files and unit.props[UNIT_IFACE]['LoadState'] != state:
        unit.UpdateProperties(UNIT_IFACE, {'LoadState': state})


_DAYS = ['Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat', 'Sun']


def _next_elapse_usec(calendar):
    '''The next time (usec since the epoch) of "[Dow[,Dow...]] *-*-* HH:MM[:SS]", local time.'''
    m = re.fullmatch(r'(?:([A-Za-z,]+) )?\*-\*-\* (\d{1,2}):(\d{2})(?::(\d{2}))?', calendar.strip())
    now = datetime.datetime.now().astimezone()
    if not m:
        return int((time.time() + 3600) * 1000000)
    days = [_DAYS.index(d[:3].capitalize()) for d in m.group(1).split(',')] if m.group(1) else \
        list(range(7))
    at = datetime.time(int(m.group(2)), int(m.group(3)), int(m.group(4) or 0))
    for ahead in range(8):
        day = (now + datetime.timedelta(days=ahead)).date()
        when = datetime.datetime.combine(day, at).astimezone()
        if day.weekday() in days and when > now:
            return int(when.timestamp()) * 1000000
    return int((time.time() + 3600) * 1000000)


def _update_next_elapse(mock, name, unit, active):
    if not active:
        unit.UpdateProperties(TIMER_IFACE, {'NextElapseUSecRealtime': dbus.UInt64(0)})
        return
    if int(unit.props[TIMER_IFACE]['NextElapseUSecRealtime']) != 0:
        return  # set by the test
    calendar = ''
    try:
        with open(os.path.join(mock.unit_dir, name), encoding='utf-8') as f:
            for line in f:
                if line.startswith('OnCalendar='):
                    calendar = line.split('=', 1)[1].strip()
    except OSError:
        pass
    unit.UpdateProperties(TIMER_IFACE,
                          {'NextElapseUSecRealtime': dbus.UInt64(_next_elapse_usec(calendar))})
