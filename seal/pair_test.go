package seal

import (
	"errors"
	"testing"
)

func TestPairingConfirm(t *testing.T) {
	secret := NewPairingSecret()
	if len(secret) != 22 {
		t.Fatalf("pairing secret of %d characters, want 22", len(secret))
	}
	if NewPairingSecret() == secret {
		t.Fatal("two pairing secrets are equal")
	}
	redeem, confirm, err := PairingKeys(secret)
	if err != nil {
		t.Fatal(err)
	}
	redeem2, confirm2, _ := PairingKeys(secret)
	if redeem != redeem2 || string(confirm) != string(confirm2) {
		t.Fatal("PairingKeys is not deterministic")
	}
	if redeem == secret || len(redeem) != 22 || len(confirm) != 32 {
		t.Fatalf("redeem %q, confirm of %d bytes", redeem, len(confirm))
	}
	_, otherConfirm, _ := PairingKeys(NewPairingSecret())

	machine, device, relay := newKeyPair(t), newKeyPair(t), newKeyPair(t)
	mTag := ConfirmTag(confirm, RoleMachine, machine.Public(), device.Public())
	dTag := ConfirmTag(confirm, RoleDevice, machine.Public(), device.Public())
	if mTag == dTag {
		t.Fatal("both roles make the same tag: the relay could reflect one side's tag")
	}
	cases := []struct {
		name            string
		key             []byte
		role            Role
		machine, device *KeyPair
		tag             string
		ok              bool
	}{
		{"machine checks the device", confirm, RoleDevice, machine, device, dTag, true},
		{"device checks the machine", confirm, RoleMachine, machine, device, mTag, true},
		{"device key swapped by the relay", confirm, RoleDevice, machine, relay, dTag, false},
		{"machine key swapped by the relay", confirm, RoleMachine, relay, device, mTag, false},
		{"own tag reflected", confirm, RoleDevice, machine, device, mTag, false},
		{"other secret", otherConfirm, RoleDevice, machine, device, dTag, false},
		{"relay's tag with the redeem token as key", []byte(redeem), RoleDevice, machine, device, ConfirmTag([]byte(redeem), RoleDevice, machine.Public(), device.Public()), false},
		{"truncated tag", confirm, RoleDevice, machine, device, dTag[:len(dTag)-1], false},
		{"empty tag", confirm, RoleDevice, machine, device, "", false},
		{"not base64", confirm, RoleDevice, machine, device, "!!", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := CheckConfirm(confirm, c.role, c.machine.Public(), c.device.Public(), c.tag)
			if c.key != nil && string(c.key) != string(confirm) {
				err = CheckConfirm(confirm, c.role, c.machine.Public(), c.device.Public(), ConfirmTag(c.key, c.role, c.machine.Public(), c.device.Public()))
			}
			if c.ok && err != nil {
				t.Fatalf("refused: %v", err)
			}
			if !c.ok && !errors.Is(err, ErrConfirm) {
				t.Fatalf("%v, want ErrConfirm", err)
			}
		})
	}
}

func TestPairingKeysRefuseBadSecret(t *testing.T) {
	for _, s := range []string{"", "abc", NewPairingSecret() + "A", "!!!!!!!!!!!!!!!!!!!!!!", b64.EncodeToString(make([]byte, 32))} {
		if _, _, err := PairingKeys(s); err == nil {
			t.Errorf("accepted pairing secret %q", s)
		}
	}
}

// The device's acceptance (role 3) is its own tag: a relay cannot pass the
// device's confirmation (role 2), nor the machine's, on as an acceptance.
func TestPairingAcceptanceIsItsOwnTag(t *testing.T) {
	_, confirm, err := PairingKeys(NewPairingSecret())
	if err != nil {
		t.Fatal(err)
	}
	machine, device := newKeyPair(t), newKeyPair(t)
	accepted := ConfirmTag(confirm, RoleDeviceAccepted, machine.Public(), device.Public())
	if err := CheckConfirm(confirm, RoleDeviceAccepted, machine.Public(), device.Public(), accepted); err != nil {
		t.Fatalf("the acceptance: %v", err)
	}
	for _, role := range []Role{RoleMachine, RoleDevice} {
		tag := ConfirmTag(confirm, role, machine.Public(), device.Public())
		if tag == accepted {
			t.Fatalf("role %d makes the acceptance's tag", role)
		}
		if err := CheckConfirm(confirm, RoleDeviceAccepted, machine.Public(), device.Public(), tag); !errors.Is(err, ErrConfirm) {
			t.Fatalf("role %d's tag passes as the acceptance: %v", role, err)
		}
	}
}
